"""The Prometheus metrics a release defines (name, type, labels, the collector class), found by following each
function that calls a metric constructor with the option interpreter: a name built from a list of specs
(`[Counter(name=n, ...) for n, doc in specs]`), a wrapper such as vLLM's `self._counter_cls(...)` or a label list
handed to the collector's constructor still resolve."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from tools.serverfacts.interp import Interpreter
from tools.serverfacts.metric_labels import ConstructorArgs, functions
from tools.serverfacts.refs import UNRESOLVED, ClassRef, FuncRef, Instance, Scope, dotted, iter_defs
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.wheel import module_name

CTORS = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary",
         "_counter_cls": "counter", "_gauge_cls": "gauge", "_histogram_cls": "histogram", "_summary_cls": "summary"}
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


@dataclass(eq=False)
class MetricObj:
    name: str
    type: str
    labels: list[str]
    labels_resolved: bool
    collector: str
    source: str
    owner: ClassRef | None
    optional_labels: list[str] = field(default_factory=list)
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


def ctor_kind(call: ast.Call) -> str | None:
    name = dotted(call.func)
    return CTORS.get(name.rsplit(".", 1)[-1]) if name else None

def label_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names the label lists of the metrics made in `fn` are built from, and the parameters stored into an
    attribute that is (`self.labels = labels`; `labelnames=self.labels.keys()`)."""
    names: set[str] = set()
    attrs: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and ctor_kind(n):
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


def _optional_labels(call: ast.Call, optional: dict[str, set[str]], labels: list[str]) -> list[str]:
    """The labels the collector's label dict gets only under a condition, for a metric whose `labelnames` are
    built from that dict (`labelnames=labels.keys()`)."""
    node = next((k.value for k in call.keywords if k.arg == "labelnames"), call.args[2] if len(call.args) > 2 else None)
    if node is None or not optional:
        return []
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    names |= set(optional) if any(isinstance(n, ast.Attribute) and n.attr in optional for n in ast.walk(node)) \
        else set()
    return sorted({k for name in names for k in optional.get(name, set())} - set(labels))


class MetricDefinitions:
    def __init__(self, res: Resolver) -> None:
        self.res = res
        self.metrics: list[MetricObj] = []
        self.args = ConstructorArgs(res)

    def run(self) -> list[MetricObj]:
        for path in self.res.pkg.paths():
            text = self.res.pkg.sources[path]
            if not any(k in text for k in CTORS):
                continue
            tree = self.res.pkg.tree_of(path)
            if tree is None:
                continue
            module = module_name(path)
            for fn, owner in functions(tree, module):
                if any(isinstance(n, ast.Call) and ctor_kind(n) for n in ast.walk(fn)):
                    self._interpret(FuncRef(module, fn, owner), owner)
            self._module_level(tree, module, path)
        return self.metrics

    def _interpret(self, fn: FuncRef, owner: ClassRef | None) -> None:
        uncertain: set[str] = set()
        optional: dict[str, set[str]] = {}
        params = [*fn.node.args.posonlyargs, *fn.node.args.args]
        wanted = label_params(fn.node)
        args: list[Any] = []
        for i, p in enumerate(params):
            if i == 0 and owner is not None and fn.kind in ("method", "class"):
                args.append(Instance(owner) if fn.kind == "method" else owner)
                continue
            value, certain = (self.args.value(fn, owner, p.arg) if fn.node.name == "__init__" and p.arg in wanted
                              else (UNRESOLVED, True))
            if not certain:
                uncertain.add(p.arg)
            if fn.node.name == "__init__" and p.arg in wanted:
                optional[p.arg] = self.args.optional(fn, owner, p.arg)
            args.append(value)
        collector = owner.name if owner is not None else ""
        path = self.res.pkg.modules.get(fn.module, fn.module)

        made: dict[tuple[int, str], MetricObj] = {}

        def observer(node: ast.Call, receiver: Any, a: list[Any], kw: dict[str, Any], scope: Scope) -> Any:
            kind = ctor_kind(node)
            if kind is not None:
                name = kw.get("name", a[0] if a else UNRESOLVED)
                if isinstance(name, str) and (id(node), name) in made:  # the same call evaluated again
                    return made[(id(node), name)]
                m = self._metric(node, kind, a, kw, scope, collector, f"{path}:{node.lineno}", owner, uncertain)
                if m is not None:
                    m.optional_labels = _optional_labels(node, optional, m.labels)
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
                kind = ctor_kind(stmt.value)
                if kind is None:
                    continue
                call = stmt.value
                scope = Scope(module)
                args = [self.res.eval(a, scope) for a in call.args]
                kw = {k.arg: self.res.eval(k.value, scope) for k in call.keywords if k.arg}
                m = self._metric(call, kind, args, kw, scope, "", f"{path}:{call.lineno}", None, set())
                if m is not None:
                    m.holders.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
