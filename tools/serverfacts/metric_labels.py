"""The label names a metric collector is built with, when they are handed to its constructor (`labels=...`,
`labelnames`): read at the places that construct the collector, from the statements that surely run before the
call (a label added under an `if`, such as a priority label, is opt-in: `optional` lists those)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from tools.serverfacts.refs import UNRESOLVED, ClassRef, FuncRef, Instance, Scope, ValueRef, bound_names, iter_defs
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.wheel import module_name

Function = ast.FunctionDef | ast.AsyncFunctionDef
Site = tuple[ast.Call, Function, ClassRef | None, str]


def functions(tree: ast.Module, module: str) -> Iterator[tuple[Function, ClassRef | None]]:
    """The module's functions and its classes' methods, with the class."""
    for stmt in iter_defs(tree.body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            yield stmt, None
        elif isinstance(stmt, ast.ClassDef):
            cls = ClassRef(module, stmt)
            for sub in iter_defs(stmt.body):
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield sub, cls


class ConstructorArgs:
    """What the places that construct a class pass for a parameter of its __init__, with a cache per class."""

    def __init__(self, res: Resolver) -> None:
        self.res = res
        self._cache: dict[tuple[int, str], tuple[Any, bool]] = {}
        self._optional: dict[tuple[int, str], set[str]] = {}
        self._sites_cache: dict[int, list[Site]] = {}


    def value(self, fn: FuncRef, owner: ClassRef | None, param: str, depth: int = 0) -> tuple[Any, bool]:
        """What the places that construct `owner` pass for `param` of its __init__: (value, all agree)."""
        if owner is None or depth > 2:
            return UNRESOLVED, True
        key = (id(owner.node), param)
        if key in self._cache:
            return self._cache[key]
        self._cache[key] = (UNRESOLVED, True)
        params = [p.arg for p in [*fn.node.args.posonlyargs, *fn.node.args.args]][1:]
        values: list[Any] = []
        for call, caller, caller_owner, module in self._construction_sites(owner):
            expr: ast.expr | None = next((k.value for k in call.keywords if k.arg == param), None)
            if expr is None and param in params and params.index(param) < len(call.args):
                expr = call.args[params.index(param)]
            if expr is None:
                continue
            needed = _names_feeding(caller, expr)
            env = _DefiniteEnv(self, caller, caller_owner, module, depth, needed).run(call)
            values.append(self.res.eval(expr, Scope(module, None, env)))
        result = _agree(values)
        self._cache[key] = result
        return result

    def optional(self, fn: FuncRef, owner: ClassRef | None, param: str) -> set[str]:
        """The keys a dict passed for `param` gets only on some paths (`labels["priority"] = ""` under an `if`,
        `labels.update({...})`, `labels = {**base, "dp_rank": r}` in one arm): in any arm before the constructing
        call, not among the keys it surely has."""
        if owner is None:
            return set()
        key = (id(owner.node), param)
        if key in self._optional:
            return self._optional[key]
        self._optional[key] = set()
        params = [p.arg for p in [*fn.node.args.posonlyargs, *fn.node.args.args]][1:]
        sure = self.value(fn, owner, param)[0]
        sure_keys = set(sure) if isinstance(sure, dict | list | tuple) else set()
        out: set[str] = set()
        for call, caller, caller_owner, module in self._construction_sites(owner):
            expr: ast.expr | None = next((k.value for k in call.keywords if k.arg == param), None)
            if expr is None and param in params and params.index(param) < len(call.args):
                expr = call.args[params.index(param)]
            if expr is None:
                continue
            env = _DefiniteEnv(self, caller, caller_owner, module, 0, _names_feeding(caller, expr),
                               every_arm=True).run(call)
            got = self.res.eval(expr, Scope(module, None, env))
            if isinstance(got, dict):
                out |= {k for k in got if isinstance(k, str)}
        out -= sure_keys
        self._optional[key] = out
        return out

    def _construction_sites(self, cls: ClassRef) -> list[Site]:
        key = id(cls.node)
        if key not in self._sites_cache:
            self._sites_cache[key] = list(self._find_sites(cls))
        return self._sites_cache[key]

    def _find_sites(self, cls: ClassRef) -> Iterator[Site]:
        for path in self.res.pkg.paths():
            if cls.name not in self.res.pkg.sources[path]:
                continue
            tree = self.res.pkg.tree_of(path)
            if tree is None:
                continue
            module = module_name(path)
            for fn, owner in functions(tree, module):
                local_cls = _locals_naming(fn, cls, owner, self.res)
                imported = {name: self.res.ref_of_def(module, name, node) for n in ast.walk(fn)
                            if isinstance(n, ast.ImportFrom) for name, node in bound_names(n)}
                local_cls |= {k for k, v in imported.items() if isinstance(v, ClassRef) and v.node is cls.node}
                for n in ast.walk(fn):
                    if isinstance(n, ast.Call) and self._constructs(n, cls, owner, module, local_cls, imported):
                        yield n, fn, owner, module

    def _constructs(self, call: ast.Call, cls: ClassRef, owner: ClassRef | None, module: str,
                    local_cls: set[str], imported: dict[str, Any]) -> bool:
        f = call.func
        if isinstance(f, ast.Name) and f.id in local_cls:
            return True
        if isinstance(f, ast.Name) and f.id in imported:
            return False
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") \
                and owner is not None:
            got = self.res.class_attr(owner, f.attr)
            while isinstance(got, ValueRef):
                nxt = self.res.ref(got.expr, Scope(got.module, got.owner))
                if nxt is UNRESOLVED or nxt is got:
                    break
                got = nxt
            return isinstance(got, ClassRef) and got.node is cls.node
        if isinstance(f, ast.Name | ast.Attribute):
            got = self.res.ref(f, Scope(module))
            return isinstance(got, ClassRef) and got.node is cls.node
        return False


def _locals_naming(fn: ast.FunctionDef | ast.AsyncFunctionDef, cls: ClassRef, owner: ClassRef | None,
                   res: Resolver) -> set[str]:
    """Local names bound to an expression that mentions the class (`collector_cls = resolve(..., TheClass)`;
    `cls` inside a classmethod of it)."""
    own = owner is not None and any(isinstance(c, ClassRef) and c.node is cls.node for c in res.mro(owner))
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            names = {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
            if cls.name in names or (own and "cls" in names):
                out.add(n.targets[0].id)
    return out


def _names_feeding(fn: ast.FunctionDef | ast.AsyncFunctionDef, expr: ast.expr) -> set[str]:
    """The names an expression reads, and the names read by the assignments to those (one step back)."""
    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in n.targets):
            names |= {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
    return names


def _agree(values: list[Any]) -> tuple[Any, bool]:
    known = [v for v in values if v is not UNRESOLVED]
    if not known:
        return UNRESOLVED, not values
    if all(isinstance(v, dict) for v in known):
        keys = [list(v) for v in known]
        common = [k for k in keys[0] if all(k in ks for ks in keys[1:])]
        same = all(set(ks) == set(keys[0]) for ks in keys)
        return dict.fromkeys(common, UNRESOLVED), same and len(known) == len(values)
    if all(isinstance(v, list | tuple) for v in known):
        common_l = [k for k in known[0] if all(k in v for v in known[1:])]
        same = all(list(v) == list(known[0]) for v in known)
        return common_l, same and len(known) == len(values)
    return known[0], len(known) == len(values)


class _DefiniteEnv:
    """Local values a function surely has when it reaches a given call: the statements before it on its path,
    not the arms of `if`s beside it (so a label added only under a condition is not counted)."""

    def __init__(self, ex: ConstructorArgs, fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: ClassRef | None,
                 module: str, depth: int, needed: set[str] | None = None, every_arm: bool = False) -> None:
        self.needed = needed or set()
        self.every_arm = every_arm  # also the arms of the `if`s beside the path: every key the dict may get
        self.ex = ex
        self.res = ex.res
        self.fn = fn
        self.owner = owner
        self.module = module
        self.depth = depth
        self.env: dict[str, Any] = {}

    def run(self, stop: ast.AST) -> dict[str, Any]:
        params = [p.arg for p in [*self.fn.args.posonlyargs, *self.fn.args.args]]
        for i, p in enumerate(params):
            if i == 0 and self.owner is not None:
                self.env[p] = Instance(self.owner)
            elif self.fn.name == "__init__" and self.owner is not None and p in self.needed:
                self.env[p] = self.ex.value(FuncRef(self.module, self.fn, self.owner), self.owner, p,
                                                   self.depth + 1)[0]
            else:
                self.env[p] = UNRESOLVED
        self._walk(self.fn.body, stop)
        return self.env

    def _walk(self, body: list[ast.stmt], stop: ast.AST | None) -> bool:
        for stmt in body:
            if stop is not None and any(n is stop for n in ast.walk(stmt)):
                for sub in _blocks(stmt):
                    if any(n is stop for s in sub for n in ast.walk(s)):
                        return self._walk(sub, stop)
                return True
            if self.every_arm and stop is not None:
                for sub in _blocks(stmt):
                    self._walk(sub, stop)
            if isinstance(stmt, ast.Return) and stop is None:
                self.env["__return__"] = self._ev(stmt.value)
                return True
            self._apply(stmt)
        return False

    def _ev(self, node: ast.expr | None) -> Any:
        return self.res.eval(node, Scope(self.module, None, self.env), call=self._call)

    def _call(self, node: ast.Call, target: Any, scope: Scope, receiver: Any) -> Any:
        if isinstance(target, FuncRef) and self.depth < 3 and target.owner is None:
            sub = _DefiniteEnv(self.ex, target.node, None, target.module, self.depth + 1)
            sub._walk(target.node.body, None)
            return sub.env.get("__return__", UNRESOLVED)
        return UNRESOLVED

    def _apply(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            t = stmt.targets[0]
            if isinstance(t, ast.Name):
                new = self._ev(stmt.value)
                old = self.env.get(t.id)
                if self.every_arm and isinstance(old, dict) and isinstance(new, dict):
                    new = {**old, **new}
                self.env[t.id] = new
            elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                d = self.env.get(t.value.id)
                k = self._ev(t.slice)
                if isinstance(d, dict) and isinstance(k, str):
                    d[k] = UNRESOLVED
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            self.env[stmt.target.id] = self._ev(stmt.value)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            f = stmt.value.func
            if isinstance(f, ast.Attribute) and f.attr == "update" and isinstance(f.value, ast.Name):
                d = self.env.get(f.value.id)
                arg = self._ev(stmt.value.args[0]) if stmt.value.args else {}
                if isinstance(d, dict):
                    if isinstance(arg, dict):
                        d.update(dict.fromkeys(arg, UNRESOLVED))
                    elif not self.every_arm:
                        self.env[f.value.id] = UNRESOLVED


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [stmt.body]
    if isinstance(stmt, ast.Try):
        return [stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody]
    return []
