"""Names across a wheel's modules, resolved from the source alone: imports (relative, star, re-exports), module
and class attributes, class hierarchies and enum members. Constant evaluation on top of these lives in
`evaluate.py`."""

from __future__ import annotations

import ast
from typing import Any

from tools.serverfacts.evaluate import Evaluator
from tools.serverfacts.refs import (
    BUILTIN_NAMES,
    ENUM_BASES,
    UNRESOLVED,
    ClassRef,
    EnumMember,
    External,
    FuncRef,
    ModuleRef,
    Scope,
    ValueRef,
    bound_names,
    dotted,
    iter_defs,
)
from tools.serverfacts.types import literal_values
from tools.serverfacts.wheel import Package


class Resolver(Evaluator):
    """Looks names up across the wheel's modules and evaluates constant expressions."""

    def __init__(self, pkg: Package) -> None:
        super().__init__()
        self.pkg = pkg
        self._defs: dict[str, dict[str, list[ast.stmt]]] = {}
        self._stars: dict[str, list[str]] = {}
        self._value_cache: dict[int, Any] = {}

    # -- modules and names ---------------------------------------------------------------------------------------

    def defs(self, module: str) -> dict[str, list[ast.stmt]]:
        if module not in self._defs:
            table: dict[str, list[ast.stmt]] = {}
            stars: list[str] = []
            tree = self.pkg.tree(module)
            if tree is not None:
                for stmt in iter_defs(tree.body):
                    for name, node in bound_names(stmt):
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
            if name in BUILTIN_NAMES:
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
            for name, node in bound_names(stmt):
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
        return any(isinstance(b, External) and b.qualname in ENUM_BASES for b in self.mro(cls))

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
                if isinstance(v, ast.Call) and dotted(v.func).endswith("auto"):
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
            return self.follow_alias(got)
        if isinstance(node, ast.Attribute):
            base = self.ref(node.value, scope)
            if isinstance(base, ValueRef):
                base = self.value_of(base)
            return self.follow_alias(self.attr_of(base, node.attr))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.ref(ast.parse(node.value, mode="eval").body, scope)
            except SyntaxError:
                return UNRESOLVED
        return UNRESOLVED

    def follow_alias(self, got: Any) -> Any:
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

    def literal_values(self, node: ast.expr, scope: Scope) -> list[Any] | None:
        return literal_values(self, node, scope)
