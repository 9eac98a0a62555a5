"""A small abstract interpreter for the functions that build a server's argument parser.

Neither server lists its options in one place: SGLang derives most from annotated dataclass fields, vLLM from
config dataclasses through `get_kwargs(...)` tables that later code edits (`kwargs["x"]["type"] = ...`), loops over
and spreads into `add_argument(**...)`. Following those functions statement by statement (both arms of a branch it
cannot decide, calls that carry the parser inlined) recovers every `add_argument` with the arguments it would get.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tools.serverfacts.refs import (
    NOT_EVALUATED,
    UNRESOLVED,
    BoundMethod,
    ClassRef,
    External,
    FuncRef,
    Instance,
    ModuleRef,
    Scope,
    ValueRef,
    bind,
    bound_names,
)
from tools.serverfacts.symbols import Resolver


@dataclass(eq=False)
class ParserObj:
    """An ArgumentParser, argument group or subparsers object the interpreted code made."""

    kind: str  # parser | group | subparsers
    parser_cls: Any
    kwargs: dict[str, Any] = field(default_factory=dict)
    parent: ParserObj | None = None
    #: a subparser's command name (`add_parser("serve", ...)`): its program is the parent's program and this name
    name: Any = None

    @property
    def root(self) -> ParserObj:
        p = self
        while p.kind == "group" and p.parent is not None:
            p = p.parent
        return p


@dataclass
class RawOption:
    """One `add_argument` call: its option strings and keyword arguments, evaluated as far as they go."""

    flags: list[Any]
    kwargs: dict[str, Any]
    source: str
    parser: ParserObj
    from_fields: bool = False  # the flags were computed (a loop over a dataclass's fields), not written out


@dataclass(frozen=True)
class TypeMarker:
    """An argparse `type=` the interpreter knows the kind of without a function to point at."""

    kind: str


@dataclass(frozen=True)
class TypeWrapper:
    """`optional_type(json.loads)`, `parse_type(int)`: a converter built around another one."""

    inner: Any
    wrapper: str


@dataclass(frozen=True)
class SuperObj:
    start: ClassRef
    bound: Any


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


# sees every call first (its arguments evaluated): a value, or NotImplemented to go on as usual
Observer = Callable[[ast.Call, Any, list[Any], dict[str, Any], Scope], Any]
# told of every store into an attribute or an attribute's item (`self.x = v`, `self.x[k] = v`)
StoreHook = Callable[[ast.expr, Any, Scope], None]

# special functions: (interpreter, function, call node, positional args, keyword args, scope) -> value, or
# NotImplemented to interpret the function as usual
Hook = Callable[["Interpreter", FuncRef, ast.Call, list[Any], dict[str, Any], Scope], Any]


class Interpreter:
    MAX_CALL_DEPTH = 10
    MAX_LOOP = 2000

    def __init__(self, res: Resolver, hooks: dict[str, Hook] | None = None,
                 observer: Observer | None = None, on_store: StoreHook | None = None,
                 fallback: Callable[[ast.expr, Scope], Any] | None = None) -> None:
        self.res = res
        self.fallback = fallback
        self.hooks = hooks or {}
        self.observer = observer
        self.on_store = on_store
        self.options: list[RawOption] = []
        self.parsers: list[ParserObj] = []
        self._call_depth = 0
        self._active: set[int] = set()

    # -- entry points --------------------------------------------------------------------------------------------

    def call_function(self, fn: FuncRef, args: list[Any], kwargs: dict[str, Any] | None = None) -> Any:
        if self._call_depth >= self.MAX_CALL_DEPTH or id(fn.node) in self._active:
            return UNRESOLVED
        scope = Scope(fn.module, None, {})
        params = fn.node.args
        positional = [*params.posonlyargs, *params.args]
        all_args = list(args)
        if fn.bound is not None:
            all_args.insert(0, fn.bound)
        defaults = params.defaults
        first_default = len(positional) - len(defaults)
        for i, p in enumerate(positional):
            if i < len(all_args):
                scope.locals[p.arg] = all_args[i]
            elif kwargs and p.arg in kwargs:
                scope.locals[p.arg] = kwargs[p.arg]
            elif i >= first_default:
                scope.locals[p.arg] = self.ev(defaults[i - first_default], Scope(fn.module, fn.owner))
            else:
                scope.locals[p.arg] = UNRESOLVED
        for p, d in zip(params.kwonlyargs, params.kw_defaults, strict=True):
            if kwargs and p.arg in kwargs:
                scope.locals[p.arg] = kwargs[p.arg]
            else:
                scope.locals[p.arg] = self.ev(d, Scope(fn.module, fn.owner)) if d is not None else UNRESOLVED
        if params.vararg is not None:
            scope.locals[params.vararg.arg] = all_args[len(positional):]
        if params.kwarg is not None:
            scope.locals[params.kwarg.arg] = dict(kwargs or {})
        scope.locals["__class__"] = fn.owner
        self._call_depth += 1
        self._active.add(id(fn.node))
        try:
            self.exec_block(fn.node.body, scope, definite=True)
        except _Return as r:
            return r.value
        finally:
            self._call_depth -= 1
            self._active.discard(id(fn.node))
        return None

    # -- statements ----------------------------------------------------------------------------------------------

    def exec_block(self, body: list[ast.stmt], scope: Scope, definite: bool) -> None:
        for stmt in body:
            self.exec_stmt(stmt, scope, definite)

    def exec_stmt(self, stmt: ast.stmt, scope: Scope, definite: bool) -> None:
        if isinstance(stmt, ast.Expr):
            self.ev(stmt.value, scope)
        elif isinstance(stmt, ast.Assign):
            value = self.ev(stmt.value, scope)
            if value is UNRESOLVED and self.fallback is not None:
                value = self.fallback(stmt.value, scope)
            for t in stmt.targets:
                self.assign(t, value, scope)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.ev(stmt.value, scope), scope)
        elif isinstance(stmt, ast.AugAssign):
            cur = self.ev(stmt.target, scope)
            add = self.ev(stmt.value, scope)
            new: Any = UNRESOLVED
            if isinstance(stmt.op, ast.Add):
                if isinstance(cur, str) and isinstance(add, str):
                    new = cur + add
                elif isinstance(cur, list) and isinstance(add, list | tuple):
                    cur.extend(add)
                    new = cur
            self.assign(stmt.target, new, scope)
        elif isinstance(stmt, ast.Delete):
            for t in stmt.targets:
                if isinstance(t, ast.Subscript):
                    container = self.ev(t.value, scope)
                    key = self.ev(t.slice, scope)
                    if isinstance(container, dict) and isinstance(key, str):
                        container.pop(key, None)
        elif isinstance(stmt, ast.If):
            test = self.ev(stmt.test, scope)
            if test is UNRESOLVED or isinstance(test, Instance | ParserObj | FuncRef | ClassRef | External):
                self.exec_block(stmt.body, scope, definite=False)
                self.exec_block(stmt.orelse, scope, definite=False)
            elif test:
                self.exec_block(stmt.body, scope, definite)
            else:
                self.exec_block(stmt.orelse, scope, definite)
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            items = self.res.iterate(self.ev(stmt.iter, scope))
            if items is UNRESOLVED:
                bind(stmt.target, UNRESOLVED, scope.locals)
                self.exec_block(stmt.body, scope, definite=False)
            else:
                for item in items[: self.MAX_LOOP]:
                    bind(stmt.target, item, scope.locals)
                    self.exec_block(stmt.body, scope, definite=False)
            self.exec_block(stmt.orelse, scope, definite=False)
        elif isinstance(stmt, ast.While):
            self.exec_block(stmt.body, scope, definite=False)
        elif isinstance(stmt, ast.Try):
            self.exec_block(stmt.body, scope, definite)
            for h in stmt.handlers:
                self.exec_block(h.body, scope, definite=False)
            self.exec_block(stmt.orelse, scope, definite)
            self.exec_block(stmt.finalbody, scope, definite)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            self.exec_block(stmt.body, scope, definite)
        elif isinstance(stmt, ast.Return):
            value = self.ev(stmt.value, scope) if stmt.value is not None else None
            if definite:
                raise _Return(value)
            scope.locals.setdefault("__maybe_return__", value)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for name, node in bound_names(stmt):
                scope.locals[name] = self.res.ref_of_def(scope.module, name, node)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            scope.locals[stmt.name] = FuncRef(scope.module, stmt)

    def assign(self, target: ast.expr, value: Any, scope: Scope) -> None:
        if isinstance(target, ast.Name | ast.Tuple | ast.List):
            bind(target, value, scope.locals)
        elif isinstance(target, ast.Subscript):
            container = self.ev(target.value, scope)
            key = self.ev(target.slice, scope)
            if isinstance(container, dict) and isinstance(key, str | int):
                container[key] = value
            elif isinstance(target.value, ast.Attribute) and self.on_store is not None:
                self.on_store(target.value, value, scope)
        elif isinstance(target, ast.Attribute) and self.on_store is not None:
            self.on_store(target, value, scope)

    # -- expressions ---------------------------------------------------------------------------------------------

    def ev(self, node: ast.expr | None, scope: Scope) -> Any:
        return self.res.eval(node, scope, call=self._on_call)

    def _args(self, node: ast.Call, scope: Scope) -> tuple[list[Any], dict[str, Any]] | None:
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.ev(a.value, scope)
                if isinstance(v, list | tuple):
                    args.extend(v)
                else:
                    args.append(UNRESOLVED)
            else:
                args.append(self.ev(a, scope))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            v = self.ev(k.value, scope)
            if k.arg is None:
                if isinstance(v, dict):
                    kwargs.update(v)
                else:
                    kwargs["__unresolved_spread__"] = True
            else:
                kwargs[k.arg] = v
        return args, kwargs

    def _on_call(self, node: ast.Call, target: Any, scope: Scope, receiver: Any) -> Any:
        func = node.func
        name = ""
        if receiver is NOT_EVALUATED:
            receiver = None
        if isinstance(func, ast.Attribute):
            name = func.attr
            if isinstance(receiver, BoundMethod):
                receiver = UNRESOLVED
        elif isinstance(func, ast.Name):
            name = func.id
            if name == "super" and not node.args:
                owner = scope.locals.get("__class__")
                first = next(iter(scope.locals.values()), None)
                return SuperObj(owner, first) if isinstance(owner, ClassRef) else UNRESOLVED
        parsed = self._args(node, scope)
        assert parsed is not None
        args, kwargs = parsed
        if self.observer is not None:
            seen = self.observer(node, receiver, args, kwargs, scope)
            if seen is not NotImplemented:
                return seen
        if isinstance(receiver, ParserObj):
            return self._parser_method(receiver, name, node, args, kwargs, scope)
        if isinstance(receiver, dict):
            return _dict_method(receiver, name, args, kwargs)
        if isinstance(receiver, list):
            return _list_method(receiver, name, args)
        if isinstance(receiver, SuperObj):
            for base in self.res.bases(receiver.start):
                if isinstance(base, ClassRef):
                    got = self.res.class_attr(base, name)
                    if isinstance(got, FuncRef):
                        return self._invoke(_bind_method(got, receiver.bound), node, args, kwargs, scope)
            return UNRESOLVED
        if isinstance(receiver, ClassRef):
            got = self.res.class_attr(receiver, name)
            if isinstance(got, FuncRef):
                return self._invoke(_bind_method(got, receiver if got.kind == "class" else None), node, args,
                                    kwargs, scope)
            target = got
        if isinstance(receiver, Instance) and isinstance(receiver.cls, ClassRef):
            got = self.res.class_attr(receiver.cls, name)
            if isinstance(got, FuncRef):
                via = receiver if got.kind == "method" else (receiver.cls if got.kind == "class" else None)
                return self._invoke(_bind_method(got, via), node, args, kwargs, scope)
            return UNRESOLVED
        if isinstance(target, ValueRef):
            target = self.res.value_of(target)
        if isinstance(target, External):
            return self._external_call(target, args, kwargs)
        if isinstance(target, ClassRef):
            if any(isinstance(b, External) and b.qualname == "argparse.ArgumentParser" for b in self.res.mro(target)):
                p = ParserObj("parser", target, kwargs)
                self.parsers.append(p)
                return p
            return Instance(target)
        if isinstance(target, FuncRef):
            return self._invoke(target, node, args, kwargs, scope)
        return UNRESOLVED

    def _invoke(self, fn: FuncRef, node: ast.Call, args: list[Any], kwargs: dict[str, Any], scope: Scope) -> Any:
        hook = self.hooks.get(fn.name)
        if hook is not None:
            got = hook(self, fn, node, args, kwargs, scope)
            if got is not NotImplemented:
                return got
        carried = [*args, *kwargs.values()]
        if any(isinstance(a, ParserObj) or (isinstance(a, dict) and a) for a in carried):
            return self.call_function(fn, args, kwargs)
        if carried and all(isinstance(a, External | FuncRef | ClassRef | TypeWrapper) for a in args) and args:
            return TypeWrapper(args[0], fn.name)
        if not args and not kwargs and fn.bound is None:
            return self.call_function(fn, [])  # `_reasoning_parser_choices()`: a constant behind a function
        return UNRESOLVED

    def _external_call(self, target: External, args: list[Any], kwargs: dict[str, Any]) -> Any:
        q = target.qualname
        if q == "argparse.ArgumentParser":
            p = ParserObj("parser", target, kwargs)
            self.parsers.append(p)
            return p
        if q in ("copy.deepcopy", "copy.copy") and args:
            return copy.deepcopy(args[0]) if isinstance(args[0], dict | list) else args[0]
        if q in ("builtins.dict",) and args and isinstance(args[0], dict):
            return {**args[0], **kwargs}
        if q == "builtins.dict" and not args:
            return dict(kwargs)
        if q in ("builtins.list",) and args and isinstance(args[0], list | tuple):
            return list(args[0])
        if q in ("functools.partial",) and args:
            return TypeWrapper(args[0], "partial")
        return UNRESOLVED

    def _parser_method(self, p: ParserObj, name: str, node: ast.Call, args: list[Any], kwargs: dict[str, Any],
                       scope: Scope) -> Any:
        if name == "add_argument":
            path = self.res.pkg.modules.get(scope.module, scope.module)
            computed = not all(isinstance(a, ast.Constant) for a in node.args)
            self.options.append(RawOption(list(args), kwargs, f"{path}:{node.lineno}", p, from_fields=computed))
            return Instance(External("argparse.Action"))
        if name in ("add_argument_group", "add_mutually_exclusive_group"):
            return ParserObj("group", p.parser_cls, kwargs, p)
        if name == "add_subparsers":
            return ParserObj("subparsers", p.parser_cls, kwargs, p)
        if name == "add_parser" and p.kind == "subparsers":
            child = ParserObj("parser", p.parser_cls, kwargs, None, args[0] if args else None)
            self.parsers.append(child)
            return child
        return UNRESOLVED


def _bind_method(fn: FuncRef, bound: Any) -> FuncRef:
    return FuncRef(fn.module, fn.node, fn.owner, bound)


def _dict_method(d: dict[Any, Any], name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if name == "pop" and args:
        return d.pop(args[0], args[1] if len(args) > 1 else None) if _is_key(args[0]) else UNRESOLVED
    if name == "update":
        if args and isinstance(args[0], dict):
            d.update(args[0])
        d.update({k: v for k, v in kwargs.items() if not k.startswith("__")})
        return None
    if name == "setdefault" and args and _is_key(args[0]):
        return d.setdefault(args[0], args[1] if len(args) > 1 else None)
    if name == "get" and args and _is_key(args[0]):
        return d.get(args[0], args[1] if len(args) > 1 else None)
    if name == "copy":
        return dict(d)
    if name == "items":
        return [tuple(kv) for kv in d.items()]
    if name == "keys":
        return list(d)
    if name == "values":
        return list(d.values())
    return UNRESOLVED


def _list_method(lst: list[Any], name: str, args: list[Any]) -> Any:
    if name == "append" and args:
        lst.append(args[0])
    elif name == "add" and args:  # a set, held as a list
        if args[0] not in lst:
            lst.append(args[0])
    elif name == "extend" and args and isinstance(args[0], list | tuple):
        lst.extend(args[0])
    elif name == "remove" and args:
        if args[0] in lst:
            lst.remove(args[0])
        elif args[0] is UNRESOLVED:
            lst.append(UNRESOLVED)  # the list is no longer known
    elif name == "insert" and len(args) == 2 and isinstance(args[0], int):
        lst.insert(args[0], args[1])
    return None


def _is_key(k: Any) -> bool:
    return isinstance(k, str | int | bool) or k is None


__all__ = ["UNRESOLVED", "Interpreter", "ModuleRef", "ParserObj", "RawOption", "TypeMarker", "TypeWrapper"]
