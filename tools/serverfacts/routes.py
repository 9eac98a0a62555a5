"""The HTTP routes a release's server registers (FastAPI/Starlette): bringup probes some of them (`/health`,
`/metrics`, `/get_server_info`) and a route that moved or vanished must show in the facts, not at run time."""

from __future__ import annotations

import ast
import re
from typing import Any

from tools.serverfacts.refs import Scope, ValueRef, dotted
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.wheel import module_name

_VERBS = {"get", "post", "put", "delete", "patch", "head", "options"}
_RECEIVER = re.compile(r"(^|\.|_)(app|router)$")
_TESTS = re.compile(r"(^|/)(tests?|test_\w+\.py|benchmarks?|examples?)(/|$)")

# where each server's HTTP endpoints are declared (other servers in the wheels, such as SGLang's diffusion server or
# vLLM's legacy demo api_server, have their own routes and are left out)
ROUTE_DIRS = {"sglang": ("sglang/srt/entrypoints/",), "vllm": ("vllm/entrypoints/",)}
ROUTE_SKIP = {"vllm": ("vllm/entrypoints/api_server.py",), "sglang": ()}
MOUNT_DIRS = {"sglang": ("sglang/srt/",), "vllm": ("vllm/",)}


def _prefix(res: Resolver, module: str, receiver: str) -> str:
    """A router's `APIRouter(prefix="/v1")`, when the module binds it at top level."""
    if "." in receiver:
        return ""
    got = res.lookup(module, receiver)
    if isinstance(got, ValueRef) and isinstance(got.expr, ast.Call):
        for k in got.expr.keywords:
            if k.arg == "prefix":
                v = res.eval(k.value, Scope(module))
                return v if isinstance(v, str) else ""
    return ""


def _methods(res: Resolver, module: str, call: ast.Call, default: list[str]) -> list[str]:
    for k in call.keywords:
        if k.arg == "methods":
            v = res.eval(k.value, Scope(module))
            if isinstance(v, list | tuple | set):
                return sorted({str(x).upper() for x in v})
            return ["?"]
    return default


def _routes_of_call(res: Resolver, module: str, call: ast.Call, decorator: bool) -> tuple[str, list[str]] | None:
    func = call.func
    if not call.args:
        return None
    name = dotted(func)
    short = name.rsplit(".", 1)[-1]
    receiver = dotted(func.value) if isinstance(func, ast.Attribute) else ""
    if short == "Mount" and not decorator:
        path = res.eval(call.args[0], Scope(module))
        return (path, ["*"]) if isinstance(path, str) else None
    if short == "Route" and not decorator:
        path = res.eval(call.args[0], Scope(module))
        return (path, _methods(res, module, call, ["GET"])) if isinstance(path, str) else None
    if not receiver or not _RECEIVER.search(receiver):
        return None
    if decorator and short in _VERBS:
        methods = [short.upper()]
    elif (short in ("api_route", "route") and decorator) or (short in ("add_api_route", "add_route") and not decorator):
        methods = _methods(res, module, call, ["GET"])
    elif short in ("websocket", "add_websocket_route", "websocket_route"):
        methods = ["WEBSOCKET"]
    elif short == "mount" and not decorator:
        methods = ["*"]
    else:
        return None
    path = res.eval(call.args[0], Scope(module))
    if not isinstance(path, str) or (not path.startswith("/") and path):
        return None
    return _prefix(res, module, receiver) + path, methods


def extract_routes(res: Resolver, server: str) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in res.pkg.paths():
        if _TESTS.search(path):
            continue
        in_routes = path.startswith(ROUTE_DIRS[server]) and not path.endswith(ROUTE_SKIP[server])
        in_mounts = path.startswith(MOUNT_DIRS[server])
        text = res.pkg.sources[path]
        if not in_mounts or ("route" not in text and "Mount" not in text and ".get(" not in text):
            continue
        tree = res.pkg.tree_of(path)
        if tree is None:
            continue
        module = module_name(path)
        for node in ast.walk(tree):
            hits: list[tuple[ast.Call, bool, int]] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and in_routes:
                hits += [(d, True, d.lineno) for d in node.decorator_list if isinstance(d, ast.Call)]
            elif isinstance(node, ast.Call):
                short = dotted(node.func).rsplit(".", 1)[-1]
                if short in ("Mount", "mount") or (in_routes and short in ("add_api_route", "add_route", "Route",
                                                                           "add_websocket_route")):
                    hits.append((node, False, node.lineno))
            for call, is_decorator, line in hits:
                got = _routes_of_call(res, module, call, is_decorator)
                if got is None:
                    continue
                route, methods = got
                entry = found.setdefault(route, {"path": route, "methods": [], "source": f"{path}:{line}"})
                entry["methods"] = sorted(set(entry["methods"]) | set(methods))
    return [found[k] for k in sorted(found)]
