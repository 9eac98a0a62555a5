"""The Prometheus metrics a release defines: name, type, labels, the collector class, and the methods that move
them (which say on what clock a number changes: per finished request, per scheduler step...).

Metric constructors are followed with the option interpreter, so a name built from a list of specs or a label list
handed down from the code that creates the collector still resolves; labels passed in as a constructor argument are
looked up at the places that construct the collector (the labels present there unconditionally: opt-in labels
added under an `if`, such as a priority label, are not listed).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tui.serverfacts.interp import Interpreter
from tui.serverfacts.symbols import (
    UNRESOLVED,
    ClassRef,
    FuncRef,
    Instance,
    Resolver,
    Scope,
    ValueRef,
    bound_names,
    dotted,
    iter_defs,
)

CTORS = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary",
         "_counter_cls": "counter", "_gauge_cls": "gauge", "_histogram_cls": "histogram", "_summary_cls": "summary"}
UPDATES = {"inc", "dec", "set", "observe", "set_to_current_time", "set_function"}
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_VIA = ("metric", "collector", "stat", "prom")
_UPDATE_TEXT = re.compile(r"\.(?:inc|dec|set|observe|set_to_current_time)\(|self\.\w+\(self\.")


@dataclass(eq=False)
class MetricObj:
    name: str
    type: str
    labels: list[str]
    labels_resolved: bool
    collector: str
    source: str
    owner: ClassRef | None
    holders: set[str] = field(default_factory=set)  # attributes of the collector (or module names) holding it
    updates: set[str] = field(default_factory=set)


@dataclass(eq=False)
class Derived:
    """A value made from metric objects (`create_metric_per_engine(counter, ...)`, `counters[0]`)."""

    metrics: list[MetricObj]


def _metrics_in(value: Any, depth: int = 0) -> list[MetricObj]:
    if depth > 4:
        return []
    if isinstance(value, MetricObj):
        return [value]
    if isinstance(value, Derived):
        return list(value.metrics)
    if isinstance(value, list | tuple):
        return [m for v in value for m in _metrics_in(v, depth + 1)]
    if isinstance(value, dict):
        return [m for v in value.values() for m in _metrics_in(v, depth + 1)]
    return []


def _ctor_kind(call: ast.Call) -> str | None:
    name = dotted(call.func)
    return CTORS.get(name.rsplit(".", 1)[-1]) if name else None


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.Module, module: str) -> Iterator[tuple[Function, ClassRef | None]]:
    for stmt in iter_defs(tree.body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            yield stmt, None
        elif isinstance(stmt, ast.ClassDef):
            cls = ClassRef(module, stmt)
            for sub in iter_defs(stmt.body):
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield sub, cls


class MetricExtractor:
    def __init__(self, res: Resolver) -> None:
        self.res = res
        self.metrics: list[MetricObj] = []
        self._callers_cache: dict[tuple[int, str], tuple[Any, bool]] = {}
        self._helpers_cache: dict[int, dict[str, int]] = {}
        self._attr_cache: dict[tuple[int, str], ClassRef | None] = {}
        self._sites_cache: dict[int, list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef,
                                                ClassRef | None, str]]] = {}

    # -- definitions ---------------------------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        for path in self.res.pkg.paths():
            text = self.res.pkg.sources[path]
            if not any(k in text for k in CTORS):
                continue
            tree = self.res.pkg.tree_of(path)
            if tree is None:
                continue
            module = _module(self.res, path)
            for fn, owner in _functions(tree, module):
                if any(isinstance(n, ast.Call) and _ctor_kind(n) for n in ast.walk(fn)):
                    self._interpret(FuncRef(module, fn, owner), owner)
            self._module_level(tree, module, path)
        self._updates()
        out = []
        seen: set[tuple[str, str, str]] = set()
        for m in self.metrics:
            key = (m.name, m.collector, m.source)
            if key in seen:
                continue
            seen.add(key)
            out.append({"name": m.name, "type": m.type, "labels": m.labels, "labels_resolved": m.labels_resolved,
                        "collector": m.collector, "source": m.source, "updated_in": sorted(m.updates)})
        out.sort(key=lambda d: (d["name"], d["collector"], d["source"]))
        return out

    def _interpret(self, fn: FuncRef, owner: ClassRef | None) -> None:
        uncertain: set[str] = set()
        params = [*fn.node.args.posonlyargs, *fn.node.args.args]
        wanted = _label_params(fn.node)
        args: list[Any] = []
        for i, p in enumerate(params):
            if i == 0 and owner is not None and fn.kind in ("method", "class"):
                args.append(Instance(owner) if fn.kind == "method" else owner)
                continue
            value, certain = (self._param_value(fn, owner, p.arg) if fn.node.name == "__init__" and p.arg in wanted
                              else (UNRESOLVED, True))
            if not certain:
                uncertain.add(p.arg)
            args.append(value)
        collector = owner.name if owner is not None else ""
        path = self.res.pkg.modules.get(fn.module, fn.module)

        made: dict[tuple[int, str], MetricObj] = {}

        def observer(node: ast.Call, receiver: Any, a: list[Any], kw: dict[str, Any], scope: Scope) -> Any:
            kind = _ctor_kind(node)
            if kind is not None:
                name = kw.get("name", a[0] if a else UNRESOLVED)
                if isinstance(name, str) and (id(node), name) in made:  # the same call evaluated again
                    return made[(id(node), name)]
                m = self._metric(node, kind, a, kw, scope, collector, f"{path}:{node.lineno}", owner, uncertain)
                if m is not None:
                    made[(id(node), m.name)] = m
                    return m
            carried = _metrics_in(a) + _metrics_in(list(kw.values())) + _metrics_in(receiver)
            return Derived(carried) if carried else NotImplemented

        def on_store(target: ast.expr, value: Any, scope: Scope) -> None:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                for m in _metrics_in(value):
                    m.holders.add(target.attr)

        def fallback(expr: ast.expr, scope: Scope) -> Any:
            found = [m for n in ast.walk(expr) if isinstance(n, ast.Name)
                     for m in _metrics_in(scope.locals.get(n.id))]
            return Derived(found) if found else UNRESOLVED

        interp = Interpreter(self.res, observer=observer, on_store=on_store, fallback=fallback)
        interp.MAX_CALL_DEPTH = 2
        bound = FuncRef(fn.module, fn.node, owner, None)
        interp.call_function(bound, args)

    def _metric(self, node: ast.Call, kind: str, args: list[Any], kw: dict[str, Any], scope: Scope, collector: str,
                source: str, owner: ClassRef | None, uncertain: set[str]) -> MetricObj | None:
        name = kw.get("name", args[0] if args else UNRESOLVED)
        has_doc = "documentation" in kw or len(args) >= 2
        if not isinstance(name, str) or not _NAME.match(name) or not has_doc:
            return None
        labels_node = next((k.value for k in node.keywords if k.arg == "labelnames"),
                           node.args[2] if len(node.args) > 2 else None)
        raw = kw.get("labelnames", args[2] if len(args) > 2 else [])
        resolved = True
        if isinstance(raw, dict):
            raw = list(raw)
        if isinstance(raw, list | tuple) and all(isinstance(x, str) for x in raw):
            labels = [str(x) for x in raw]
            if labels_node is not None and any(isinstance(n, ast.Name) and n.id in uncertain
                                               for n in ast.walk(labels_node)):
                resolved = False
        else:
            resolved = False
            labels = sorted({n.value for n in ast.walk(labels_node) if isinstance(n, ast.Constant)
                             and isinstance(n.value, str)}) if labels_node is not None else []
        m = MetricObj(name, kind, labels, resolved, collector, source, owner)
        self.metrics.append(m)
        return m

    def _module_level(self, tree: ast.Module, module: str, path: str) -> None:
        for stmt in iter_defs(tree.body):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                kind = _ctor_kind(stmt.value)
                if kind is None:
                    continue
                call = stmt.value
                scope = Scope(module)
                args = [self.res.eval(a, scope) for a in call.args]
                kw = {k.arg: self.res.eval(k.value, scope) for k in call.keywords if k.arg}
                m = self._metric(call, kind, args, kw, scope, "", f"{path}:{call.lineno}", None, set())
                if m is not None:
                    m.holders.update(t.id for t in stmt.targets if isinstance(t, ast.Name))

    # -- labels handed to a collector's constructor ----------------------------------------------------------------

    def _param_value(self, fn: FuncRef, owner: ClassRef | None, param: str, depth: int = 0) -> tuple[Any, bool]:
        """What the places that construct `owner` pass for `param` of its __init__: (value, all agree)."""
        if owner is None or depth > 2:
            return UNRESOLVED, True
        key = (id(owner.node), param)
        if key in self._callers_cache:
            return self._callers_cache[key]
        self._callers_cache[key] = (UNRESOLVED, True)
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
        self._callers_cache[key] = result
        return result

    def _construction_sites(self, cls: ClassRef) -> list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef,
                                                               ClassRef | None, str]]:
        key = id(cls.node)
        if key not in self._sites_cache:
            self._sites_cache[key] = list(self._find_sites(cls))
        return self._sites_cache[key]

    def _find_sites(self, cls: ClassRef) -> Iterator[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef,
                                                           ClassRef | None, str]]:
        for path in self.res.pkg.paths():
            if cls.name not in self.res.pkg.sources[path]:
                continue
            tree = self.res.pkg.tree_of(path)
            if tree is None:
                continue
            module = _module(self.res, path)
            for fn, owner in _functions(tree, module):
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

    # -- who moves them --------------------------------------------------------------------------------------------

    def _updates(self) -> None:
        by_attr: dict[str, list[MetricObj]] = {}
        for m in self.metrics:
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
            module = _module(self.res, path)
            for fn, owner in _functions(tree, module):
                self._updates_in(fn, owner, by_attr)

    def _updates_in(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: ClassRef | None,
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


def _label_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names the label lists of the metrics made in `fn` are built from, and the parameters stored into an
    attribute that is (`self.labels = labels`; `labelnames=self.labels.keys()`)."""
    names: set[str] = set()
    attrs: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and _ctor_kind(n):
            exprs = [k.value for k in n.keywords if k.arg == "labelnames"] + n.args[2:3]
            for e in exprs:
                for x in ast.walk(e):
                    if isinstance(x, ast.Name):
                        names.add(x.id)
                    elif isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "self":
                        attrs.add(x.attr)
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr in attrs for t in n.targets):
            names.update(x.id for x in ast.walk(n.value) if isinstance(x, ast.Name))
    return names


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


def _module(res: Resolver, path: str) -> str:
    from tui.serverfacts.wheel import module_name

    return module_name(path)


class _DefiniteEnv:
    """Local values a function surely has when it reaches a given call: the statements before it on its path,
    not the arms of `if`s beside it (so a label added only under a condition is not counted)."""

    def __init__(self, ex: MetricExtractor, fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: ClassRef | None,
                 module: str, depth: int, needed: set[str] | None = None) -> None:
        self.needed = needed or set()
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
                self.env[p] = self.ex._param_value(FuncRef(self.module, self.fn, self.owner), self.owner, p,
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
                self.env[t.id] = self._ev(stmt.value)
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
                    else:
                        self.env[f.value.id] = UNRESOLVED


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [stmt.body]
    if isinstance(stmt, ast.Try):
        return [stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody]
    return []


def extract_metrics(res: Resolver) -> list[dict[str, Any]]:
    return MetricExtractor(res).run()
