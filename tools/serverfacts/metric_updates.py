"""Which methods move each metric (`.inc()`, `.set()`, `.observe()` on the attribute holding it, directly, through
a helper such as `_log_gauge(self.gauge, v)`, or through the collector held by another class): they say on what
clock a number changes (per finished request, per scheduler step)."""

from __future__ import annotations

import ast
import re
from typing import Any

from tools.serverfacts.metric_defs import MetricObj
from tools.serverfacts.metric_labels import Function, functions
from tools.serverfacts.refs import UNRESOLVED, ClassRef, Scope, ValueRef, iter_defs
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.wheel import module_name

UPDATES = {"inc", "dec", "set", "observe", "set_to_current_time", "set_function"}
_VIA = ("metric", "collector", "stat", "prom")
_UPDATE_TEXT = re.compile(r"\.(?:inc|dec|set|observe|set_to_current_time)\(|self\.\w+\(self\.")


class UpdateFinder:
    def __init__(self, res: Resolver) -> None:
        self.res = res
        self._helpers_cache: dict[int, dict[str, int]] = {}
        self._attr_cache: dict[tuple[int, str], ClassRef | None] = {}


    def run(self, metrics: list[MetricObj]) -> None:
        by_attr: dict[str, list[MetricObj]] = {}
        for m in metrics:
            for h in m.holders:
                by_attr.setdefault(h, []).append(m)
        if not by_attr:
            return
        pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, by_attr))) + r")\b")
        for path in self.res.pkg.paths():
            text = self.res.pkg.sources[path]
            if not _UPDATE_TEXT.search(text) or not pattern.search(text):
                continue
            tree = self.res.pkg.tree_of(path)
            if tree is None:
                continue
            module = module_name(path)
            for fn, owner in functions(tree, module):
                self._updates_in(fn, owner, by_attr)

    def _updates_in(self, fn: Function, owner: ClassRef | None,
                    by_attr: dict[str, list[MetricObj]]) -> None:
        where = f"{owner.name}.{fn.name}" if owner is not None else fn.name
        # a module-level metric is updated through its global name
        aliases: dict[str, set[str]] = {m_name: {m_name} for m_name, ms in by_attr.items()
                                        if any(m.owner is None for m in ms)}
        calls: list[ast.Call] = []
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                calls.append(n)
                continue
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(n, ast.Assign):
                targets, value = n.targets, n.value
            elif isinstance(n, ast.For):
                targets, value = [n.target], n.iter
            if value is None:
                continue
            held = {a.attr for a in ast.walk(value) if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
                    and a.value.id == "self" and a.attr in by_attr}
            if held:
                for t in targets:
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            aliases.setdefault(name.id, set()).update(held)
        mro: set[int] | None = None

        def in_mro(m: MetricObj) -> bool:
            nonlocal mro
            if m.owner is None or owner is None:
                return False
            if mro is None:
                mro = {id(c.node) for c in self.res.mro(owner) if isinstance(c, ClassRef)}
            return id(m.owner.node) in mro

        def fits(m: MetricObj, attr: str, how: bool | str) -> bool:
            if how is True:
                return (m.owner is None and attr in aliases) or (m.owner is not None and in_mro(m))
            if isinstance(how, str) and owner is not None and m.owner is not None:
                held = self._attr_class(owner, how)  # `self.metrics.x`: x of the class self.metrics holds
                if held is not None:
                    return any(isinstance(c, ClassRef) and c.node is m.owner.node for c in self.res.mro(held))
            return m.owner is not None

        for n in calls:
            assert isinstance(n.func, ast.Attribute)
            if n.func.attr in UPDATES:
                for attr, how in _chain_holders(n.func.value, aliases):
                    for m in by_attr.get(attr, []):
                        if fits(m, attr, how):
                            m.updates.add(where)
            elif isinstance(n.func.value, ast.Name) and n.func.value.id == "self" and owner is not None and any(
                    isinstance(a, ast.Attribute) and a.attr in by_attr for a in n.args):
                i = self._helpers(owner).get(n.func.attr)
                if i is not None and i < len(n.args):
                    for attr, how in _chain_holders(n.args[i], aliases):
                        for m in by_attr.get(attr, []):
                            if fits(m, attr, how):
                                m.updates.add(where)

    def _attr_class(self, owner: ClassRef, attr: str) -> ClassRef | None:
        """The class an attribute of `owner`'s instances holds, when a method assigns it a constructed object."""
        key = (id(owner.node), attr)
        if key in self._attr_cache:
            return self._attr_cache[key]
        self._attr_cache[key] = None
        for c in self.res.mro(owner):
            if not isinstance(c, ClassRef):
                continue
            for n in ast.walk(c.node):
                if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                        isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                        and t.value.id == "self" for t in n.targets)):
                    continue
                f = n.value.func
                got: Any = UNRESOLVED
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
                    got = self.res.class_attr(c, f.attr)
                    if isinstance(got, ValueRef):
                        got = self.res.ref(got.expr, Scope(got.module, got.owner))
                elif isinstance(f, ast.Name | ast.Attribute):
                    got = self.res.ref(f, Scope(c.module))
                if isinstance(got, ClassRef):
                    self._attr_cache[key] = got
                    return got
        return None

    def _helpers(self, owner: ClassRef) -> dict[str, int]:
        """Methods that update a metric handed to them (`_log_gauge(self, gauge, value)`): name -> its index."""
        key = id(owner.node)
        if key not in self._helpers_cache:
            self._helpers_cache[key] = self._find_helpers(owner)
        return self._helpers_cache[key]

    def _find_helpers(self, owner: ClassRef) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.res.mro(owner):
            if not isinstance(c, ClassRef):
                continue
            for sub in iter_defs(c.node.body):
                if not isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                params = [p.arg for p in sub.args.args][1:]
                for n in ast.walk(sub):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in UPDATES:
                        root = _root_name(n.func.value)
                        if root in params:
                            out.setdefault(sub.name, params.index(root))
        return out


def _root_name(e: ast.expr) -> str:
    while True:
        if isinstance(e, ast.Call):
            e = e.func
        elif isinstance(e, ast.Attribute | ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Name):
            return e.id
        else:
            return ""


def _chain_holders(e: ast.expr, aliases: dict[str, set[str]]) -> list[tuple[str, bool | str]]:
    """The metric-holding attributes an update's receiver starts from: (attr, True) on self; (attr, "x") through
    `self.x.attr`; (attr, False) through some other object."""
    path: list[str] = []
    while True:
        if isinstance(e, ast.Call):
            e = e.func
            if isinstance(e, ast.Attribute):  # a method in the chain (`.labels(...)`, `.get(...)`)
                e = e.value
        elif isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Attribute):
            path.append(e.attr)
            e = e.value
        elif isinstance(e, ast.Name):
            break
        else:
            return []
    path.reverse()
    root = e.id
    if root == "self" and len(path) == 1:
        return [(path[0], True)]
    if root == "self" and len(path) >= 2 and any(k in p.lower() for p in path[:-1] for k in _VIA):
        return [(path[-1], path[0] if len(path) == 2 else False)]
    if root != "self" and not path and root in aliases:
        return [(a, True) for a in sorted(aliases[root])]
    if root != "self" and path and any(k in root.lower() for k in _VIA):
        return [(path[-1], False)]
    return []
