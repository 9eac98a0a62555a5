"""What a name in a wheel's source can stand for once resolved (a module, a class, a function, an assigned value,
an enum member, something outside the wheel) and the marker for "not known statically"."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


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
        names = {dotted(d) for d in self.node.decorator_list}
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


BUILTIN_NAMES = frozenset(dir(builtins))
ENUM_BASES = frozenset({"enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag"})
STR_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "replace", "removeprefix", "removesuffix",
                          "format", "join", "split", "title", "capitalize", "startswith", "endswith"})


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    if isinstance(node, ast.Call):
        return dotted(node.func)
    return ""



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


def bound_names(stmt: ast.stmt) -> list[tuple[str, ast.stmt]]:
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


class FrozenList(list):
    """A set's items as an ordered list (sets of strings print in a stable order once sorted)."""


@dataclass
class BoundMethod:
    obj: Any
    name: str



def hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return x is not UNRESOLVED


def bind(target: ast.expr, value: Any, into: dict[str, Any]) -> bool:
    if isinstance(target, ast.Name):
        into[target.id] = value
        return True
    if isinstance(target, ast.Tuple | ast.List):
        if not isinstance(value, list | tuple) or len(value) != len(target.elts):
            for t in target.elts:
                bind(t, UNRESOLVED, into)
            return value is UNRESOLVED
        return all(bind(t, v, into) for t, v in zip(target.elts, value, strict=True))
    return False




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
