"""Options derived from dataclass fields: what SGLang's `add_cli_args_from_dataclass` and vLLM's `get_kwargs` compute
from a field's annotation, re-derived from the annotation's source.

Both helpers run `typing.get_type_hints` on live classes; the rules they then apply are short and are mirrored here
branch for branch (with the few spots that changed between vLLM releases read off the release's own helper text).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from tools.serverfacts.interp import Interpreter, ParserObj, RawOption, TypeMarker
from tools.serverfacts.refs import UNRESOLVED, ClassRef, External, FuncRef, Scope, dotted, iter_defs
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.types import TypeAtom, type_atoms, unwrap_annotated


@dataclass
class FieldDecl:
    name: str
    annotation: ast.expr
    default: ast.expr | None
    owner: ClassRef
    line: int
    doc: str

    def source(self, res: Resolver) -> str:
        return f"{res.pkg.modules.get(self.owner.module, self.owner.module)}:{self.line}"


def record_fields(res: Resolver, cls: ClassRef, _seen: frozenset[int] = frozenset()) -> list[FieldDecl]:
    """The fields of a dataclass-like class in declaration order: the bases' first, then its own; for SGLang's
    ServerArgs also the namespace classes its module passes to `collect_input_fields(...)`."""
    if id(cls.node) in _seen:
        return []
    seen = _seen | {id(cls.node)}
    out: dict[str, FieldDecl] = {}
    for base in reversed(res.bases(cls)):
        if isinstance(base, ClassRef):
            for f in record_fields(res, base, seen):
                out[f.name] = f
    for ns in _collected_namespaces(res, cls):
        for f in record_fields(res, ns, seen):
            out.setdefault(f.name, f)
    body = list(iter_defs(cls.node.body))
    for i, stmt in enumerate(body):
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        atoms = type_atoms(res, stmt.annotation, Scope(cls.module, cls))
        if any(a.kind == "classvar" for a in atoms):
            continue
        doc = ""
        nxt = body[i + 1] if i + 1 < len(body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            doc = nxt.value.value
        out[stmt.target.id] = FieldDecl(stmt.target.id, stmt.annotation, stmt.value, cls, stmt.lineno, doc)
    return list(out.values())


def _collected_namespaces(res: Resolver, cls: ClassRef) -> list[ClassRef]:
    tree = res.pkg.tree(cls.module)
    if tree is None:
        return []
    for stmt in iter_defs(tree.body):
        value = stmt.value if isinstance(stmt, ast.Assign | ast.Expr) else None
        if isinstance(value, ast.Call) and dotted(value.func).endswith("collect_input_fields") and value.args:
            got = res.eval(value.args[0], Scope(cls.module))
            if isinstance(got, list | tuple):
                return [c for c in got if isinstance(c, ClassRef)]
    return []


def _non_none(atoms: tuple[TypeAtom, ...]) -> list[TypeAtom]:
    return [a for a in atoms if a.kind != "none"]


# -- SGLang: add_cli_args_from_dataclass ---------------------------------------------------------------------------


def sglang_dataclass_hook(interp: Interpreter, fn: FuncRef, node: ast.Call, args: list[Any], kwargs: dict[str, Any],
                          scope: Scope) -> Any:
    """`add_cli_args_from_dataclass(parser, cls, fields=None)`: one option per field annotated `A[T, ...]`."""
    if fn.name != "add_cli_args_from_dataclass" or len(args) < 2:
        return NotImplemented
    parser, cls = args[0], args[1]
    only = kwargs.get("fields")
    if not isinstance(parser, ParserObj) or not isinstance(cls, ClassRef):
        return NotImplemented
    res = interp.res
    for fd in record_fields(res, cls):
        if isinstance(only, list) and fd.name not in only:
            continue
        opt = _sglang_field_option(res, fd)
        if opt is not None:
            flags, kw = opt
            interp.options.append(RawOption(flags, kw, fd.source(res), parser, from_fields=True))
    return None


def _arg_meta(res: Resolver, meta: list[ast.expr], scope: Scope) -> dict[str, Any] | None:
    for m in meta:
        if isinstance(m, ast.Call) and dotted(m.func).rsplit(".", 1)[-1] == "Arg":
            out: dict[str, Any] = {}
            for k in m.keywords:
                if k.arg:
                    out[k.arg] = res.eval(k.value, scope)
            return out
        v = res.eval(m, scope)
        if isinstance(v, str):
            return {"help": v}
        if isinstance(m, ast.JoinedStr | ast.BinOp):
            return {"help": UNRESOLVED}
    return None


def _sglang_field_option(res: Resolver, fd: FieldDecl) -> tuple[list[Any], dict[str, Any]] | None:
    scope = Scope(fd.owner.module, fd.owner)
    raw, _, meta = unwrap_annotated(res, fd.annotation, scope)
    arg = _arg_meta(res, meta, scope)
    if arg is None or arg.get("no_cli") is True:
        return None
    cli_name = arg.get("cli_name") if isinstance(arg.get("cli_name"), str) else "--" + fd.name.replace("_", "-")
    aliases = arg.get("aliases")
    names: list[Any] = [cli_name, *(aliases if isinstance(aliases, list) else [])]
    kw: dict[str, Any] = {"help": arg.get("help", ""), "dest": fd.name}
    if arg.get("action") not in (None, UNRESOLVED):
        kw["action"] = arg["action"]
        if isinstance(arg.get("action_kwargs"), dict):
            kw.update(arg["action_kwargs"])
        return names, kw
    atoms = type_atoms(res, raw, scope)
    inner = _non_none(atoms)
    single = inner[0] if len(inner) == 1 else None
    type_parser = arg.get("type_parser")
    if single is not None and single.kind == "literal":
        kw["choices"] = arg.get("choices") or list(single.values)
        kw["type"] = type_parser or _py_type(single.values[0] if single.values else "")
    elif single is not None and single.kind == "list" and type_parser is None:
        elem = _non_none(single.args[0]) if single.args else []
        kw["type"] = _atom_type(elem[0]) if len(elem) == 1 else External("builtins.str")
        kw["nargs"] = arg.get("nargs") or "+"
        if arg.get("choices"):
            kw["choices"] = arg["choices"]
    elif single is not None and single.kind == "bool":
        kw["action"] = "store_true"
    else:
        kw["type"] = type_parser or (_atom_type(single) if single is not None else External("builtins.str"))
        if arg.get("choices"):
            kw["choices"] = arg["choices"]
        if arg.get("nargs"):
            kw["nargs"] = arg["nargs"]
    return names, kw


def _py_type(value: Any) -> Any:
    return External(f"builtins.{type(value).__name__}") if isinstance(value, str | int | float) else UNRESOLVED


def _atom_type(atom: TypeAtom) -> Any:
    if atom.kind in ("int", "float", "str"):
        return External(f"builtins.{atom.kind}")
    return External("builtins.str")


# -- vLLM: get_kwargs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _VllmFlavor:
    """The spots where vLLM's `get_kwargs` changed between releases, read off the release's arg_utils.py."""

    bool_action: str  # BooleanOptionalAction | store_true
    optional_flag: bool  # `bool | str | None` -> nargs="?"
    dataclass_json: bool  # a dataclass-typed field takes JSON
    literal_metavar_with_str: bool  # `Literal[...] | str` -> no choices (a metavar)


def _flavor(res: Resolver, module: str) -> _VllmFlavor:
    text = res.pkg.sources.get(res.pkg.modules.get(module, ""), "")
    return _VllmFlavor(
        bool_action="BooleanOptionalAction" if "BooleanOptionalAction" in text else "store_true",
        optional_flag="{bool, str, type(None)}" in text,
        dataclass_json="is_dataclass" in text,
        literal_metavar_with_str='"metavar" if contains_type(type_hints, str)' in text,
    )


def vllm_get_kwargs_hook(interp: Interpreter, fn: FuncRef, node: ast.Call, args: list[Any], kwargs: dict[str, Any],
                         scope: Scope) -> Any:
    """`get_kwargs(SomeConfig)`: the table of argparse keyword arguments per field, as vLLM builds it."""
    if fn.name not in ("get_kwargs", "_compute_kwargs") or not args or not isinstance(args[0], ClassRef):
        return NotImplemented
    res = interp.res
    flavor = _flavor(res, fn.module)
    table: dict[str, dict[str, Any]] = {}
    for fd in record_fields(res, args[0]):
        table[fd.name] = vllm_field_kwargs(res, fd, flavor)
    return table


def vllm_field_kwargs(res: Resolver, fd: FieldDecl, flavor: _VllmFlavor) -> dict[str, Any]:
    scope = Scope(fd.owner.module, fd.owner)
    atoms = type_atoms(res, fd.annotation, scope)
    kinds = {a.kind for a in atoms}
    kw: dict[str, Any] = {"help": fd.doc.strip(), "__field_source__": fd.source(res)}
    has_none = "none" in kinds
    non_builtin = any(a.kind in ("other", "enum", "dataclass", "any") for a in atoms)
    if flavor.dataclass_json and "dataclass" in kinds:
        kw["type"] = TypeMarker("json")
    elif flavor.optional_flag and kinds == {"bool", "str", "none"}:
        kw.update(type=External("builtins.str"), nargs="?", const=True)
    elif "bool" in kinds:
        kw["action"] = (External("argparse.BooleanOptionalAction") if flavor.bool_action == "BooleanOptionalAction"
                        else "store_true")
    elif "literal" in kinds:
        kw.update(_literal_kwargs(atoms, flavor))
    elif kinds & {"tuple", "list", "set"}:
        coll = next(a for a in atoms if a.kind in ("tuple", "list", "set"))
        elem = coll.args[0] if coll.args else ()
        elem_kinds = {a.kind for a in elem}
        if len(elem) == 1 and elem[0].kind == "literal":
            kw.update(_literal_kwargs(elem, flavor))
        else:
            kw["type"] = _atom_type(elem[0]) if len(elem) == 1 else (
                External("builtins.str") if "str" in elem_kinds else UNRESOLVED)
        nargs: Any = "+"
        if coll.kind == "tuple" and not coll.ellipsis:
            nargs = len(coll.args)
        kw["nargs"] = nargs
    elif "int" in kinds:
        kw["type"] = External("builtins.int")
    elif "float" in kinds:
        kw["type"] = External("builtins.float")
    elif "dict" in kinds:
        kw["type"] = TypeMarker("json")
    elif "str" in kinds or non_builtin:
        kw["type"] = External("builtins.str")
    else:
        kw["type"] = UNRESOLVED
    if has_none and "bool" not in kinds and isinstance(kw.get("choices"), list):
        kw["choices"].append("None")
    return kw


def _literal_kwargs(atoms: tuple[TypeAtom, ...] | list[TypeAtom], flavor: _VllmFlavor) -> dict[str, Any]:
    lit = next(a for a in atoms if a.kind == "literal")
    values = list(lit.values)
    out: dict[str, Any] = {"type": _py_type(values[0]) if values else UNRESOLVED}
    if flavor.literal_metavar_with_str and any(a.kind == "str" for a in atoms):
        out["metavar"] = values
    else:
        out["choices"] = values
    return out
