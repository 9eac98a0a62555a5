"""Type annotations read as the sets of types argparse helpers branch on (vLLM's `get_kwargs`, SGLang's
`add_cli_args_from_dataclass`): unions flattened, aliases and `Annotated` unwrapped, `Literal` values evaluated."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tools.serverfacts.refs import UNRESOLVED, ClassRef, EnumMember, External, Scope, ValueRef, dotted


class Lookups(Protocol):
    """The name lookups an annotation is read through (symbols.py's `Resolver` has them). Declared here, not
    imported: the resolver reads `Literal` values through this module, so each importing the other was a circle."""

    def ref(self, node: ast.expr, scope: Scope) -> Any: ...

    def eval(self, node: ast.expr | None, scope: Scope, call: Callable[..., Any] | None = None) -> Any: ...

    def mro(self, cls: ClassRef, _seen: frozenset[int] = frozenset()) -> list[Any]: ...

    def is_enum(self, cls: ClassRef) -> bool: ...

    def enum_members(self, cls: ClassRef) -> list[EnumMember]: ...

_SIMPLE = {
    "bool": "bool", "int": "int", "float": "float", "str": "str", "bytes": "str", "NoneType": "none",
    "dict": "dict", "Dict": "dict", "Mapping": "dict", "MutableMapping": "dict", "OrderedDict": "dict",
    "defaultdict": "dict", "list": "list", "List": "list", "tuple": "tuple", "Tuple": "tuple", "set": "set",
    "Set": "set", "frozenset": "set", "FrozenSet": "set", "Any": "any", "object": "any",
}
_UNION = {"Union", "Optional"}
_WRAPPERS = {"Annotated", "Final", "Required", "NotRequired", "ReadOnly", "SkipValidation"}


@dataclass(frozen=True)
class TypeAtom:
    """One member of a flattened union. `args`: element atoms of a list/set/tuple; `values`: a Literal's values."""

    kind: str  # bool int float str none dict list tuple set literal dataclass enum any classvar other
    name: str = ""
    args: tuple[tuple[TypeAtom, ...], ...] = ()
    values: tuple[Any, ...] = ()
    ellipsis: bool = False
    ref: ClassRef | None = None


def _short(ref: Any) -> str:
    if isinstance(ref, External):
        return ref.short
    if isinstance(ref, ClassRef):
        return ref.name
    return ""


def unwrap_annotated(res: Lookups, node: ast.expr, scope: Scope) -> tuple[ast.expr, Scope, list[ast.expr]]:
    """The annotated type and its metadata expressions (`A[int, "help"]` -> int, ["help"]), following one alias."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return node, scope, []
    if isinstance(node, ast.Subscript):
        base = res.ref(node.value, scope)
        if _short(base) == "Annotated" and isinstance(node.slice, ast.Tuple) and node.slice.elts:
            return node.slice.elts[0], scope, list(node.slice.elts[1:])
    return node, scope, []


def type_atoms(res: Lookups, node: ast.expr | None, scope: Scope, _depth: int = 0) -> tuple[TypeAtom, ...]:
    if node is None or _depth > 25:
        return (TypeAtom("other", "?"),)
    d = _depth + 1
    if isinstance(node, ast.Constant):
        if node.value is None:
            return (TypeAtom("none"),)
        if isinstance(node.value, str):
            try:
                return type_atoms(res, ast.parse(node.value, mode="eval").body, scope, d)
            except SyntaxError:
                return (TypeAtom("other", node.value),)
        return (TypeAtom("other", repr(node.value)),)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _dedupe(type_atoms(res, node.left, scope, d) + type_atoms(res, node.right, scope, d))
    if isinstance(node, ast.Subscript):
        return _subscript(res, node, scope, d)
    if isinstance(node, ast.Name | ast.Attribute):
        return _named(res, res.ref(node, scope), dotted(node), d)
    return (TypeAtom("other", ast.unparse(node)[:40]),)


def _named(res: Lookups, ref: Any, spelled: str, d: int) -> tuple[TypeAtom, ...]:
    if isinstance(ref, External):
        if ref.qualname in ("builtins.None", "types.NoneType"):
            return (TypeAtom("none"),)
        kind = _SIMPLE.get(ref.short)
        if kind is not None and (ref.qualname.split(".")[0] in ("builtins", "typing", "typing_extensions",
                                                                 "collections", "types")
                                 or ref.short in ("Mapping", "MutableMapping")):
            return (TypeAtom(kind, ref.short),)
        return (TypeAtom("other", ref.qualname),)
    if isinstance(ref, ClassRef):
        if res.is_enum(ref):
            members = res.enum_members(ref)
            return (TypeAtom("enum", ref.name, values=tuple(members), ref=ref),)
        if is_record_class(res, ref):
            return (TypeAtom("dataclass", ref.name, ref=ref),)
        if any(isinstance(b, External) and b.short in ("dict", "Dict") for b in res.mro(ref)):
            return (TypeAtom("dict", ref.name),)
        if any(isinstance(b, External) and b.short == "TypedDict" for b in res.mro(ref)):
            return (TypeAtom("other", ref.name),)
        return (TypeAtom("other", ref.name, ref=ref),)
    if isinstance(ref, ValueRef):
        expr = ref.expr
        scope = Scope(ref.module, ref.owner)
        if isinstance(expr, ast.Call):
            fn = _short(res.ref(expr.func, scope))
            if fn in ("TypeAliasType", "NewType") and len(expr.args) >= 2:
                return type_atoms(res, expr.args[1], scope, d)
            if fn == "TypeVar":
                return (TypeAtom("any"),)
        return type_atoms(res, expr, scope, d)
    if spelled == "None":
        return (TypeAtom("none"),)
    return (TypeAtom("other", spelled or "?"),)


def _subscript(res: Lookups, node: ast.Subscript, scope: Scope, d: int) -> tuple[TypeAtom, ...]:
    base = res.ref(node.value, scope)
    name = _short(base)
    elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if name in _UNION:
        out = tuple(a for e in elts for a in type_atoms(res, e, scope, d))
        return _dedupe(out + ((TypeAtom("none"),) if name == "Optional" else ()))
    if name in _WRAPPERS:
        return type_atoms(res, elts[0], scope, d)
    if name == "ClassVar" or name == "InitVar":
        return (TypeAtom("classvar"),)
    if name == "Literal":
        vals: list[Any] = []
        for e in elts:
            v = res.eval(e, scope)
            if v is UNRESOLVED and isinstance(e, ast.Name | ast.Attribute):
                inner = literal_values(res, e, scope)  # Literal[OtherLiteral, "x"]
                if inner is not None:
                    vals.extend(inner)
                    continue
            vals.append(v)
        return (TypeAtom("literal", values=tuple(vals)),)
    kind = _SIMPLE.get(name)
    if kind in ("list", "set"):
        return (TypeAtom(kind, name, args=(type_atoms(res, elts[0], scope, d),)),)
    if kind == "tuple":
        ell = any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts)
        items = tuple(type_atoms(res, e, scope, d) for e in elts
                      if not (isinstance(e, ast.Constant) and e.value is Ellipsis))
        return (TypeAtom("tuple", name, args=items, ellipsis=ell),)
    if kind == "dict":
        return (TypeAtom("dict", name),)
    if name in ("Sequence", "Iterable", "MutableSequence", "Collection"):
        return (TypeAtom("other", name, args=(type_atoms(res, elts[0], scope, d),)),)
    if name == "type":
        return (TypeAtom("other", "type"),)
    return (TypeAtom("other", name or ast.unparse(node)[:40]),)


def _dedupe(atoms: tuple[TypeAtom, ...]) -> tuple[TypeAtom, ...]:
    out: list[TypeAtom] = []
    for a in atoms:
        if a not in out:
            out.append(a)
    return tuple(out)


def literal_values(res: Lookups, node: ast.expr, scope: Scope) -> list[Any] | None:
    """The values of a Literal (or a union of Literals) an expression names, or None."""
    atoms = type_atoms(res, node, scope)
    lits = [a for a in atoms if a.kind == "literal"]
    if not lits or any(v is UNRESOLVED for a in lits for v in a.values):
        return None
    return [v for a in lits for v in a.values]


def is_record_class(res: Lookups, cls: ClassRef) -> bool:
    """A dataclass, pydantic dataclass, vLLM `@config` class, msgspec Struct or pydantic model."""
    for c in res.mro(cls):
        if isinstance(c, External) and c.short in ("Struct", "BaseModel"):
            return True
        if isinstance(c, ClassRef):
            for dec in c.node.decorator_list:
                name = dotted(dec).rsplit(".", 1)[-1]
                if name in ("dataclass", "config", "pydantic_dataclass", "dataclasses"):
                    return True
    return False
