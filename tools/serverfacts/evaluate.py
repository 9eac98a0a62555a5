"""Constant evaluation of expressions in a wheel's source: what the release would compute at import time for an
option's choices (a module constant, an enum's member names, `typing.get_args` of a Literal), a metric's name or a
label list, without running anything; UNRESOLVED for everything else rather than a guess."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from tools.serverfacts.refs import (
    NOT_EVALUATED,
    STR_METHODS,
    UNRESOLVED,
    BoundMethod,
    ClassRef,
    EnumMember,
    External,
    FrozenList,
    FuncRef,
    Instance,
    ModuleRef,
    Scope,
    ValueRef,
    bind,
    bound_names,
    hashable,
)


class Evaluator:
    """Evaluation over the name lookups of a subclass (the Resolver), which provides the abstract methods."""

    MAX_DEPTH = 40

    def __init__(self) -> None:
        self._depth = 0
        self._in_progress: set[int] = set()

    def ref(self, node: ast.expr, scope: Scope) -> Any:
        raise NotImplementedError

    def attr_of(self, base: Any, attr: str) -> Any:
        raise NotImplementedError

    def follow_alias(self, got: Any) -> Any:
        raise NotImplementedError

    def value_of(self, ref: ValueRef) -> Any:
        raise NotImplementedError

    def is_enum(self, cls: ClassRef) -> bool:
        raise NotImplementedError

    def enum_members(self, cls: ClassRef) -> list[EnumMember]:
        raise NotImplementedError

    def ref_of_def(self, module: str, name: str, node: ast.stmt) -> Any:
        raise NotImplementedError

    def literal_values(self, node: ast.expr, scope: Scope) -> list[Any] | None:
        raise NotImplementedError


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
                return FrozenList(items)
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
                if key is UNRESOLVED or not hashable(key):
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
                return self._deref(self.follow_alias(self.attr_of(base, node.attr)))
            if isinstance(base, Instance | dict | list | str) or base is UNRESOLVED:
                return BoundMethod(base, node.attr) if base is not UNRESOLVED else UNRESOLVED
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
                    return FrozenList([*left, *[x for x in right if x not in left]])
            if isinstance(node.op, ast.Mult) and isinstance(left, int | float) and isinstance(right, int | float):
                return left * right
            return UNRESOLVED
        if isinstance(node, ast.Subscript):
            base = ev(node.value, scope, call)
            idx = ev(node.slice, scope, call)
            if isinstance(base, dict) and hashable(idx) and idx in base:
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
            if not bind(gen.target, item, local.locals):
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
        return FrozenList(out) if isinstance(node, ast.SetComp) else out

    def _call(self, node: ast.Call, scope: Scope, call: Callable[..., Any] | None) -> Any:
        func = node.func
        base: Any = NOT_EVALUATED
        # str / dict / list methods on evaluated values
        if isinstance(func, ast.Attribute):
            base = self.eval(func.value, scope, call)
            if isinstance(base, str) and func.attr in STR_METHODS:
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
                return base.get(key, dflt) if hashable(key) else UNRESOLVED
            if isinstance(base, list | tuple) and func.attr == "copy":
                return list(base)
        if isinstance(func, ast.Attribute) and base is not UNRESOLVED:
            target = self.follow_alias(self.attr_of(base.obj if isinstance(base, BoundMethod) else base, func.attr))
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
                        FrozenList(items) if short in ("set", "frozenset") else list(items))
                if short == "dict" and not node.args:  # dict(model_name=...)
                    return {k.arg: self.eval(k.value, scope, call) for k in node.keywords if k.arg}
                if short in ("list", "tuple", "set") and not node.args:
                    return {"list": [], "tuple": (), "set": FrozenList([])}[short]
                if short == "str" and len(node.args) == 1:
                    v = self.eval(node.args[0], scope, call)
                    return v if isinstance(v, str) else UNRESOLVED
                if short == "get_args" and len(node.args) == 1:
                    vals = self.literal_values(node.args[0], scope)
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
                    for name, node in bound_names(stmt):
                        local.locals[name] = self.ref_of_def(fn.module, name, node)
                    continue
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                    val = self.eval(stmt.value, local)
                    if not bind(stmt.targets[0], val, local.locals):
                        return UNRESOLVED
                    continue
                if isinstance(stmt, ast.Return):
                    return self.eval(stmt.value, local)
                return UNRESOLVED
            return UNRESOLVED
        finally:
            self._in_progress.discard(key)
