"""Names and constant values across a wheel's modules, resolved from the source alone.

The facts want what a release's code would compute at import time (an option's choices from a module constant, an
enum's member names, a metric's name from a prefix constant) without running it; this resolves the common shapes
(literals, imports, class attributes, enum members, comprehensions over them, `typing.get_args`) and says
UNRESOLVED for everything else rather than guess.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tui.serverfacts.wheel import Package


class _Unresolved:
    _instance: _Unresolved | None = None

    def __new__(cls) -> _Unresolved:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNRESOLVED"

    def __bool__(self) -> bool:
        return False


UNRESOLVED: Any = _Unresolved()
NOT_EVALUATED: Any = object()  # a call's receiver when the call has none (`f(x)`, not `obj.f(x)`)


@dataclass(frozen=True)
class ModuleRef:
    name: str


@dataclass(frozen=True)
class External:
    """A name from outside the wheel (`json.loads`, `argparse.BooleanOptionalAction`, `typing.Literal`)."""

    qualname: str

    @property
    def short(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True, eq=False)
class ClassRef:
    module: str
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True, eq=False)
class FuncRef:
    module: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: ClassRef | None = None  # the class whose body defines it
    bound: Any = None  # what the first parameter is bound to (a classmethod's class), if anything

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def kind(self) -> str:
        names = {_dotted(d) for d in self.node.decorator_list}
        if "staticmethod" in names:
            return "static"
        if "classmethod" in names:
            return "class"
        return "method" if self.owner is not None else "function"


@dataclass(frozen=True, eq=False)
class ValueRef:
    """An assigned value, evaluated only when asked for."""

    module: str
    expr: ast.expr
    owner: ClassRef | None = None


@dataclass(frozen=True)
class EnumMember:
    cls: ClassRef
    name: str
    value: Any

    def as_choice(self) -> str:
        return self.value if isinstance(self.value, str) else self.name


@dataclass
class Instance:
    """An object the evaluator made up (an instance of a class it cannot run); attributes stay unknown."""

    cls: Any


_BUILTIN_NAMES = frozenset(dir(builtins))
_ENUM_BASES = frozenset({"enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag"})
_STR_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "replace", "removeprefix", "removesuffix",
                          "format", "join", "split", "title", "capitalize", "startswith", "endswith"})


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


dotted = _dotted


def iter_defs(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements of a body, descending into if/try/with blocks (conditional imports and constants)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from iter_defs(stmt.body)
            yield from iter_defs(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from iter_defs(stmt.body)
            for h in stmt.handlers:
                yield from iter_defs(h.body)
            yield from iter_defs(stmt.orelse)
            yield from iter_defs(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            yield from iter_defs(stmt.body)
        else:
            yield stmt


def _bound_names(stmt: ast.stmt) -> list[tuple[str, ast.stmt]]:
    out: list[tuple[str, ast.stmt]] = []
    if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        out.append((stmt.name, stmt))
    elif isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            if isinstance(t, ast.Name):
                out.append((t.id, stmt))
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        out.append((stmt.target.id, stmt))
    elif isinstance(stmt, ast.Import):
        for a in stmt.names:
            out.append(((a.asname or a.name).split(".")[0], stmt))
    elif isinstance(stmt, ast.ImportFrom):
        for a in stmt.names:
            if a.name != "*":
                out.append((a.asname or a.name, stmt))
    return out


@dataclass
class Scope:
    """Where an expression is evaluated: its module, the class body it sits in, and local bindings."""

    module: str
    owner: ClassRef | None = None
    locals: dict[str, Any] = field(default_factory=dict)


class Resolver:
    """Looks names up across the wheel's modules and evaluates constant expressions."""

    MAX_DEPTH = 40

    def __init__(self, pkg: Package) -> None:
        self.pkg = pkg
        self._defs: dict[str, dict[str, list[ast.stmt]]] = {}
        self._stars: dict[str, list[str]] = {}
        self._depth = 0
        self._in_progress: set[int] = set()
        self._value_cache: dict[int, Any] = {}

    # -- modules and names ---------------------------------------------------------------------------------------

    def defs(self, module: str) -> dict[str, list[ast.stmt]]:
        if module not in self._defs:
            table: dict[str, list[ast.stmt]] = {}
            stars: list[str] = []
            tree = self.pkg.tree(module)
            if tree is not None:
                for stmt in iter_defs(tree.body):
                    for name, node in _bound_names(stmt):
                        table.setdefault(name, []).append(node)
                    if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                        stars.append(self.absolute(module, stmt))
            self._defs[module] = table
            self._stars[module] = stars
        return self._defs[module]

    def absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        path = self.pkg.modules.get(module, "")
        is_pkg = path.endswith("__init__.py")
        parts = module.split(".")
        base = parts if is_pkg else parts[:-1]
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, node.module] if node.module else base)

    def lookup(self, module: str, name: str) -> Any:
        """What `name` means at the top level of `module`: a ref, or UNRESOLVED."""
        if self._depth > self.MAX_DEPTH:
            return UNRESOLVED
        self._depth += 1
        try:
            return self._lookup(module, name)
        finally:
            self._depth -= 1

    def _lookup(self, module: str, name: str) -> Any:
        if module not in self.pkg.modules:
            return External(f"{module}.{name}") if module else UNRESOLVED
        nodes = self.defs(module).get(name)
        if not nodes:
            sub = f"{module}.{name}"
            if sub in self.pkg.modules:
                return ModuleRef(sub)
            for star in self._stars.get(module, []):
                got = self.lookup(star, name)
                if got is not UNRESOLVED:
                    return got
            if name in _BUILTIN_NAMES:
                return External(f"builtins.{name}")
            return UNRESOLVED
        # a real definition beats an import of the same name (`try: import x` / `except: x = None` keeps the import)
        node = next((n for n in nodes if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)),
                    nodes[0])
        return self.ref_of_def(module, name, node)

    def ref_of_def(self, module: str, name: str, node: ast.stmt) -> Any:
        if isinstance(node, ast.ClassDef):
            return ClassRef(module, node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return FuncRef(module, node)
        if isinstance(node, ast.Assign | ast.AnnAssign):
            assert node.value is not None
            return ValueRef(module, node.value)
        if isinstance(node, ast.Import):
            for a in node.names:
                bound = (a.asname or a.name).split(".")[0]
                if bound != name:
                    continue
                target = a.name if a.asname else a.name.split(".")[0]
                return ModuleRef(target) if target in self.pkg.modules else External(target)
        if isinstance(node, ast.ImportFrom):
            src = self.absolute(module, node)
            for a in node.names:
                if (a.asname or a.name) != name:
                    continue
                if f"{src}.{a.name}" in self.pkg.modules:
                    return ModuleRef(f"{src}.{a.name}")
                if src in self.pkg.modules:
                    return self.lookup(src, a.name)
                return External(f"{src}.{a.name}")
        return UNRESOLVED

    def class_attr(self, cls: ClassRef, attr: str, _seen: frozenset[int] = frozenset()) -> Any:
        """A class attribute (own body first, then the bases): a FuncRef, ClassRef, EnumMember or ValueRef."""
        if id(cls.node) in _seen:
            return UNRESOLVED
        is_enum = self.is_enum(cls)
        for stmt in iter_defs(cls.node.body):
            for name, node in _bound_names(stmt):
                if name != attr:
                    continue
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    return FuncRef(cls.module, node, owner=cls)
                if isinstance(node, ast.ClassDef):
                    return ClassRef(cls.module, node)
                if is_enum and isinstance(node, ast.Assign) and not attr.startswith("_"):
                    return self.enum_member(cls, attr)
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    return ValueRef(cls.module, node.value, owner=cls)
                return self.ref_of_def(cls.module, name, node)
        for base in self.bases(cls):
            if isinstance(base, ClassRef):
                got = self.class_attr(base, attr, _seen | {id(cls.node)})
                if got is not UNRESOLVED:
                    return got
        return UNRESOLVED

    def bases(self, cls: ClassRef) -> list[Any]:
        return [self.ref(b, Scope(cls.module)) for b in cls.node.bases]

    def mro(self, cls: ClassRef, _seen: frozenset[int] = frozenset()) -> list[Any]:
        """The class and its ancestors, depth first (a plain approximation of the MRO); externals as External."""
        if id(cls.node) in _seen:
            return []
        out: list[Any] = [cls]
        for b in self.bases(cls):
            if isinstance(b, ClassRef):
                out.extend(self.mro(b, _seen | {id(cls.node)}))
            elif isinstance(b, External):
                out.append(b)
        return out

    def is_enum(self, cls: ClassRef) -> bool:
        return any(isinstance(b, External) and b.qualname in _ENUM_BASES for b in self.mro(cls))

    def is_subclass_of(self, cls: ClassRef, qualname: str) -> bool:
        return any(isinstance(b, External) and b.qualname == qualname for b in self.mro(cls))

    def enum_members(self, cls: ClassRef) -> list[EnumMember]:
        out = []
        for stmt in iter_defs(cls.node.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if not name.startswith("_"):
                    out.append(self.enum_member(cls, name))
        return out

    def enum_member(self, cls: ClassRef, name: str) -> EnumMember:
        index = 0
        for stmt in iter_defs(cls.node.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                if stmt.targets[0].id.startswith("_"):
                    continue
                index += 1
                if stmt.targets[0].id != name:
                    continue
                v = stmt.value
                if isinstance(v, ast.Call) and _dotted(v.func).endswith("auto"):
                    return EnumMember(cls, name, name.lower() if self.is_subclass_of(cls, "enum.StrEnum") else index)
                value = self.eval(v, Scope(cls.module, cls))
                if isinstance(value, tuple) and value:
                    value = value[0]
                return EnumMember(cls, name, value)
        return EnumMember(cls, name, UNRESOLVED)

    # -- references ----------------------------------------------------------------------------------------------

    def ref(self, node: ast.expr, scope: Scope) -> Any:
        """What a name or dotted name refers to (aliases followed), without evaluating assigned values."""
        if self._depth > self.MAX_DEPTH:
            return UNRESOLVED
        self._depth += 1
        try:
            return self._ref(node, scope)
        finally:
            self._depth -= 1

    def _ref(self, node: ast.expr, scope: Scope) -> Any:
        if isinstance(node, ast.Name):
            if node.id in scope.locals:
                return scope.locals[node.id]
            got: Any = UNRESOLVED
            if scope.owner is not None:
                got = self.class_attr(scope.owner, node.id)
            if got is UNRESOLVED:
                got = self.lookup(scope.module, node.id)
            return self._follow_alias(got)
        if isinstance(node, ast.Attribute):
            base = self.ref(node.value, scope)
            if isinstance(base, ValueRef):
                base = self.value_of(base)
            return self._follow_alias(self.attr_of(base, node.attr))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.ref(ast.parse(node.value, mode="eval").body, scope)
            except SyntaxError:
                return UNRESOLVED
        return UNRESOLVED

    def _follow_alias(self, got: Any) -> Any:
        # `A = Annotated`, `Gauge = prometheus_client.Gauge`: a name bound to another name is that name
        seen = 0
        while isinstance(got, ValueRef) and isinstance(got.expr, ast.Name | ast.Attribute) and seen < 10:
            nxt = self.ref(got.expr, Scope(got.module, got.owner))
            if nxt is UNRESOLVED:
                break
            got, seen = nxt, seen + 1
        return got

    def attr_of(self, base: Any, attr: str) -> Any:
        if isinstance(base, ModuleRef):
            return self.lookup(base.name, attr)
        if isinstance(base, External):
            return External(f"{base.qualname}.{attr}")
        if isinstance(base, ClassRef):
            return self.class_attr(base, attr)
        if isinstance(base, EnumMember):
            if attr == "value":
                return base.value
            if attr == "name":
                return base.name
        return UNRESOLVED

    def value_of(self, ref: ValueRef) -> Any:
        key = id(ref.expr)
        if key in self._value_cache:
            return self._value_cache[key]
        if key in self._in_progress:
            return UNRESOLVED
        self._in_progress.add(key)
        try:
            value = self.eval(ref.expr, Scope(ref.module, ref.owner))
        finally:
            self._in_progress.discard(key)
        self._value_cache[key] = value
        return value

    # -- constant evaluation -------------------------------------------------------------------------------------

    def eval(self, node: ast.expr | None, scope: Scope, call: Callable[..., Any] | None = None) -> Any:
        """The value of an expression: a Python constant or container, a ref, or UNRESOLVED. `call`, when given,
        evaluates calls the resolver does not know (the option interpreter follows functions through it)."""
        if node is None or self._depth > self.MAX_DEPTH:
            return UNRESOLVED
        self._depth += 1
        try:
            return self._eval(node, scope, call)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError):
            return UNRESOLVED
        finally:
            self._depth -= 1

    def _eval(self, node: ast.expr, scope: Scope, call: Callable[..., Any] | None) -> Any:
        ev = self.eval
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                    continue
                assert isinstance(v, ast.FormattedValue)
                x = ev(v.value, scope, call)
                if x is UNRESOLVED or not isinstance(x, str | int | float | bool):
                    return UNRESOLVED
                spec = ev(v.format_spec, scope, call) if v.format_spec is not None else ""
                if v.conversion == ord("r"):
                    x = repr(x)
                parts.append(format(x, spec if isinstance(spec, str) else ""))
            return "".join(parts)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items: list[Any] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    inner = self.iterate(ev(e.value, scope, call))
                    if inner is UNRESOLVED:
                        return UNRESOLVED
                    items.extend(inner)
                    continue
                x = ev(e, scope, call)
                if x is UNRESOLVED:
                    return UNRESOLVED
                items.append(x)
            if isinstance(node, ast.Tuple):
                return tuple(items)
            if isinstance(node, ast.Set):
                return _FrozenList(items)
            return items
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                val = ev(v, scope, call)
                if k is None:
                    if not isinstance(val, dict):
                        return UNRESOLVED
                    out.update(val)
                    continue
                key = ev(k, scope, call)
                if key is UNRESOLVED or not _hashable(key):
                    return UNRESOLVED
                out[key] = val
            return out
        if isinstance(node, ast.Name):
            if node.id in scope.locals:
                return self._deref(scope.locals[node.id])
            return self._deref(self.ref(node, scope))
        if isinstance(node, ast.Attribute):
            base = ev(node.value, scope, call)
            if isinstance(base, EnumMember | ModuleRef | External | ClassRef):
                return self._deref(self._follow_alias(self.attr_of(base, node.attr)))
            if isinstance(base, Instance | dict | list | str) or base is UNRESOLVED:
                return _BoundMethod(base, node.attr) if base is not UNRESOLVED else UNRESOLVED
            return UNRESOLVED
        if isinstance(node, ast.BinOp):
            left, right = ev(node.left, scope, call), ev(node.right, scope, call)
            if left is UNRESOLVED or right is UNRESOLVED:
                return UNRESOLVED
            if isinstance(node.op, ast.Add):
                if isinstance(left, list) and isinstance(right, list | tuple):
                    return [*left, *right]
                if isinstance(left, tuple) and isinstance(right, tuple | list):
                    return (*left, *right)
                if isinstance(left, str) and isinstance(right, str):
                    return left + right
                if isinstance(left, int | float) and isinstance(right, int | float):
                    return left + right
            if isinstance(node.op, ast.BitOr):
                if isinstance(left, dict) and isinstance(right, dict):
                    return {**left, **right}
                if isinstance(left, list | tuple) and isinstance(right, list | tuple):
                    return _FrozenList([*left, *[x for x in right if x not in left]])
            if isinstance(node.op, ast.Mult) and isinstance(left, int | float) and isinstance(right, int | float):
                return left * right
            return UNRESOLVED
        if isinstance(node, ast.Subscript):
            base = ev(node.value, scope, call)
            idx = ev(node.slice, scope, call)
            if isinstance(base, dict) and _hashable(idx) and idx in base:
                return base[idx]
            if isinstance(base, list | tuple) and isinstance(idx, int):
                return base[idx]
            return UNRESOLVED
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return self._comprehension(node, scope, call)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = ev(node.left, scope, call), ev(node.comparators[0], scope, call)
            if left is UNRESOLVED or right is UNRESOLVED:
                return UNRESOLVED
            op = node.ops[0]
            if isinstance(op, ast.Eq):
                return left == right
            if isinstance(op, ast.NotEq):
                return left != right
            if isinstance(op, ast.In):
                return left in right
            if isinstance(op, ast.NotIn):
                return left not in right
            if isinstance(op, ast.Is):
                return left is right
            if isinstance(op, ast.IsNot):
                return left is not right
            return UNRESOLVED
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = ev(node.operand, scope, call)
            return UNRESOLVED if v is UNRESOLVED else not v
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = ev(node.operand, scope, call)
            return -v if isinstance(v, int | float) else UNRESOLVED
        if isinstance(node, ast.Call):
            return self._call(node, scope, call)
        return UNRESOLVED

    def _deref(self, got: Any) -> Any:
        return self.value_of(got) if isinstance(got, ValueRef) else got

    def iterate(self, value: Any) -> list[Any] | Any:
        if isinstance(value, list | tuple):
            return list(value)
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, str):
            return list(value)
        if isinstance(value, ClassRef) and self.is_enum(value):
            return list(self.enum_members(value))
        return UNRESOLVED

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, scope: Scope,
                       call: Callable[..., Any] | None) -> Any:
        if len(node.generators) != 1:
            return UNRESOLVED
        gen = node.generators[0]
        items = self.iterate(self.eval(gen.iter, scope, call))
        if items is UNRESOLVED:
            return UNRESOLVED
        out = []
        for item in items:
            local = Scope(scope.module, scope.owner, dict(scope.locals))
            if not _bind(gen.target, item, local.locals):
                return UNRESOLVED
            keep = True
            for cond in gen.ifs:
                c = self.eval(cond, local, call)
                if c is UNRESOLVED:
                    return UNRESOLVED
                keep = keep and bool(c)
            if keep:
                v = self.eval(node.elt, local, call)
                if v is UNRESOLVED:
                    return UNRESOLVED
                out.append(v)
        return _FrozenList(out) if isinstance(node, ast.SetComp) else out

    def _call(self, node: ast.Call, scope: Scope, call: Callable[..., Any] | None) -> Any:
        func = node.func
        base: Any = NOT_EVALUATED
        # str / dict / list methods on evaluated values
        if isinstance(func, ast.Attribute):
            base = self.eval(func.value, scope, call)
            if isinstance(base, str) and func.attr in _STR_METHODS:
                args = [self.eval(a, scope, call) for a in node.args]
                kwargs = {k.arg: self.eval(k.value, scope, call) for k in node.keywords if k.arg}
                if any(a is UNRESOLVED for a in args) or any(v is UNRESOLVED for v in kwargs.values()):
                    return UNRESOLVED
                if func.attr == "join":
                    seq = self.iterate(args[0]) if args else UNRESOLVED
                    if seq is UNRESOLVED or not all(isinstance(s, str) for s in seq):
                        return UNRESOLVED
                    return base.join(seq)
                if func.attr == "format":
                    return UNRESOLVED
                return getattr(base, func.attr)(*args, **kwargs)
            if isinstance(base, dict) and func.attr in ("keys", "values", "items", "copy", "get"):
                if func.attr == "keys":
                    return list(base.keys())
                if func.attr == "values":
                    return list(base.values())
                if func.attr == "items":
                    return [tuple(kv) for kv in base.items()]
                if func.attr == "copy":
                    return dict(base)
                key = self.eval(node.args[0], scope, call) if node.args else UNRESOLVED
                dflt = self.eval(node.args[1], scope, call) if len(node.args) > 1 else None
                return base.get(key, dflt) if _hashable(key) else UNRESOLVED
            if isinstance(base, list | tuple) and func.attr == "copy":
                return list(base)
        if isinstance(func, ast.Attribute) and base is not UNRESOLVED:
            target = self._follow_alias(self.attr_of(base.obj if isinstance(base, _BoundMethod) else base, func.attr))
        else:
            target = self.ref(func, scope) if isinstance(func, ast.Name | ast.Attribute) else UNRESOLVED
        if isinstance(target, ValueRef):
            target = self.value_of(target)
        if isinstance(target, External):
            q = target.qualname
            short = target.short
            if q.startswith("builtins.") or q in ("typing.get_args", "typing_extensions.get_args"):
                if short in ("list", "tuple", "sorted", "set", "frozenset") and len(node.args) == 1:
                    items = self.iterate(self.eval(node.args[0], scope, call))
                    if items is UNRESOLVED:
                        return UNRESOLVED
                    if short == "sorted":
                        try:
                            return sorted(items)
                        except TypeError:
                            return UNRESOLVED
                    return tuple(items) if short == "tuple" else (
                        _FrozenList(items) if short in ("set", "frozenset") else list(items))
                if short == "dict" and not node.args:  # dict(model_name=...)
                    return {k.arg: self.eval(k.value, scope, call) for k in node.keywords if k.arg}
                if short in ("list", "tuple", "set") and not node.args:
                    return {"list": [], "tuple": (), "set": _FrozenList([])}[short]
                if short == "str" and len(node.args) == 1:
                    v = self.eval(node.args[0], scope, call)
                    return v if isinstance(v, str) else UNRESOLVED
                if short == "get_args" and len(node.args) == 1:
                    from tui.serverfacts.types import literal_values

                    vals = literal_values(self, node.args[0], scope)
                    return tuple(vals) if vals is not None else UNRESOLVED
        if call is not None:
            return call(node, target, scope, base)
        if isinstance(target, FuncRef) and not node.args and not node.keywords:
            return self.eval_trivial_function(target)
        return UNRESOLVED

    def eval_trivial_function(self, fn: FuncRef) -> Any:
        """The value a function without arguments returns when its body is only imports, constant assignments
        and a return (`def _reasoning_parser_choices(): from x import NAMES; return list(NAMES)`)."""
        key = id(fn.node)
        if key in self._in_progress:
            return UNRESOLVED
        self._in_progress.add(key)
        try:
            local = Scope(fn.module, None, {})
            for stmt in fn.node.body:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    continue
                if isinstance(stmt, ast.Import | ast.ImportFrom):
                    for name, node in _bound_names(stmt):
                        local.locals[name] = self.ref_of_def(fn.module, name, node)
                    continue
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                    val = self.eval(stmt.value, local)
                    if not _bind(stmt.targets[0], val, local.locals):
                        return UNRESOLVED
                    continue
                if isinstance(stmt, ast.Return):
                    return self.eval(stmt.value, local)
                return UNRESOLVED
            return UNRESOLVED
        finally:
            self._in_progress.discard(key)


class _FrozenList(list):
    """A set's items as an ordered list (sets of strings print in a stable order once sorted)."""


@dataclass
class _BoundMethod:
    obj: Any
    name: str


BoundMethod = _BoundMethod


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return x is not UNRESOLVED


def _bind(target: ast.expr, value: Any, into: dict[str, Any]) -> bool:
    if isinstance(target, ast.Name):
        into[target.id] = value
        return True
    if isinstance(target, ast.Tuple | ast.List):
        if not isinstance(value, list | tuple) or len(value) != len(target.elts):
            for t in target.elts:
                _bind(t, UNRESOLVED, into)
            return value is UNRESOLVED
        return all(_bind(t, v, into) for t, v in zip(target.elts, value, strict=True))
    return False


bind = _bind
bound_names = _bound_names


def choice_strings(value: Any) -> list[str] | None:
    """Choices as the strings a command line carries, or None when any is unknown."""
    if isinstance(value, dict):
        value = list(value)
    if not isinstance(value, list | tuple):
        return None
    out = []
    for v in value:
        if v is UNRESOLVED or isinstance(v, ClassRef | FuncRef | ValueRef | External | ModuleRef | Instance):
            return None
        out.append(v.as_choice() if isinstance(v, EnumMember) else str(v))
    return out
