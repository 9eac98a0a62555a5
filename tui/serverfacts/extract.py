"""One release's facts from its wheel: pure functions from the wheel's bytes to the facts dict (and its JSON text).

The facts replace hand-written knowledge of each server (options, log wordings, metrics, routes) with what the
release's own code says, each with the source line it came from, so a refresh after a new release is a reviewable
diff. Nothing of the wheel is imported or run: `zipfile`, `ast` and text only.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any

from tui.serverfacts.logformats import LogFormat, as_dicts, extract_log_formats, messages_of_module
from tui.serverfacts.metrics import extract_metrics
from tui.serverfacts.options import extract_options
from tui.serverfacts.refs import FuncRef, Scope, dotted
from tui.serverfacts.routes import extract_routes
from tui.serverfacts.symbols import Resolver
from tui.serverfacts.types import type_atoms
from tui.serverfacts.wheel import Package, WheelError, read_wheel

SCHEMA = 1
SERVERS = ("sglang", "vllm")
SIZE_BUDGET = 350_000


def _dirs(*names: str) -> re.Pattern[str]:
    return re.compile("|".join(names))


# Log formats a release's facts drop, tier by tier, while the file is over the budget: first what no server process
# prints (the brief's order: tests, benchmarks, examples, vendored code; then the wheel's other programs), then what
# says least about a server's state (programming-error exceptions, debug lines, per-model code, other exceptions).
_SIDE = _dirs(r"(^|/)(tests?|testing|benchmarks?|bench|examples?|third_party|_vendor|vendor(ed)?)/",
              r"(^|/)test_[^/]*\.py:", r"(^|/)conftest\.py:")
_OTHER_PROGRAMS = _dirs(r"^sglang/(multimodal_gen|kernels|jit_kernel|eval|lang|test)/", r"/(debug_utils|tools)/",
                        r"/\.agents/", r"^vllm/(benchmarks|entrypoints/cli/benchmark)/", r"^sglang/(bench_|profiler)")
_PER_MODEL = _dirs(r"^sglang/srt/(models|layers|hardware_backend|configs|multimodal)/",
                   r"^vllm/model_executor/(models|layers)/", r"^vllm/transformers_utils/(configs|processors)/",
                   r"^vllm/multimodal/", r"^vllm/(tool_parsers|reasoning)/", r"^sglang/srt/(function_call|parser)/")
_PROGRAMMING_ERRORS = ("NotImplementedError", "TypeError", "AttributeError", "AssertionError", "KeyError",
                       "IndexError")
# by file: kept only when everything else fits (and then only for messages the server's own code lacks)
PATH_TIERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("from test/benchmark/example/vendored code", _SIDE),
    ("from the wheel's other programs (SGLang's diffusion runtime, kernels, tools; vLLM's benchmarks)",
     _OTHER_PROGRAMS),
)
# by message, in the order they go
ENTRY_TIERS: tuple[tuple[str, Callable[[LogFormat], object]], ...] = (
    (f"of programming-error exceptions ({', '.join(_PROGRAMMING_ERRORS)})",
     lambda f: f.via.startswith("raise ") and f.via[6:] in _PROGRAMMING_ERRORS),
    ("of debug-level logging", lambda f: "debug" in f.via),
    ("of exceptions raised in per-model/layer/parser code", lambda f: f.via.startswith("raise ")
     and _PER_MODEL.search(f.source)),
    ("from per-model/layer/parser code", lambda f: _PER_MODEL.search(f.source)),
    ("of the remaining exceptions", lambda f: f.via.startswith("raise ")),
)
_VLLM_ARGS_LINES = {"non-default args: %s": "non_default_dict", "args: %s": "namespace"}
SGLANG_ARGS_FILES = ("sglang/srt/entrypoints/engine.py", "sglang/srt/entrypoints/http_server.py",
                     "sglang/launch_server.py")


def facts_from_wheel(data: bytes, file_name: str, server: str,
                     budget: int = SIZE_BUDGET) -> tuple[dict[str, Any], list[str]]:
    """The facts dict of a wheel, and notes on what was dropped or left unresolved (for the refresh's report)."""
    if server not in SERVERS:
        raise WheelError(f"{server}: not a server bringup knows ({', '.join(SERVERS)})")
    pkg = read_wheel(data, file_name, server)
    return facts_from_package(pkg, budget)


def facts_from_package(pkg: Package, budget: int = SIZE_BUDGET) -> tuple[dict[str, Any], list[str]]:
    res = Resolver(pkg)
    notes: list[str] = []
    opts = extract_options(res, pkg.server)
    if opts.unresolved_flags:
        notes.append(f"{opts.unresolved_flags} add_argument calls with option strings not resolved statically")
    metrics = extract_metrics(res)
    facts: dict[str, Any] = {
        "schema": SCHEMA,
        "server": pkg.server,
        "version": pkg.version,
        "wheel": {"file": pkg.wheel_file, "sha256": pkg.sha256},
        "argparse": {"allow_abbrev": opts.allow_abbrev, "underscore_spellings": opts.underscore_spellings,
                     "source": opts.source},
        "options": opts.options,
        "positionals": opts.positionals,
        "log_formats": [],
        "metrics": metrics,
        "args_line": None,
        "routes": extract_routes(res, pkg.server),
        "version_line": None,
    }
    base = len(dumps(facts).encode())
    formats, dropped = fit_budget(res, base, budget)
    facts["log_formats"] = as_dicts(formats)
    facts["args_line"] = args_line(res, pkg, formats)
    facts["version_line"] = version_line(pkg.server, formats)
    notes.extend(dropped)
    return facts, notes


def fit_budget(res: Resolver, base: int, budget: int) -> tuple[list[LogFormat], list[str]]:
    """The log formats that fit the size budget next to the rest of the facts (`base` bytes), dropping whole tiers
    (never an arbitrary cut, so a refresh's diff shows what the release changed, not where a cut fell); notes say
    what went. Files of the path tiers are read only if the server's own messages leave room for them."""
    paths = res.pkg.paths()
    tiers: list[list[str]] = []
    rest = paths
    for _label, pattern in PATH_TIERS:
        tiers.append([p for p in rest if pattern.search(p + ":")])
        rest = [p for p in rest if not pattern.search(p + ":")]
    kept = extract_log_formats(res, rest)
    notes: list[str] = []
    size = base + sum(_entry_size(f) for f in kept)
    for (label, _pattern), tier_paths in reversed(list(zip(PATH_TIERS, tiers, strict=True))):
        if size > budget or not tier_paths:
            if tier_paths:
                notes.insert(0, f"dropped the log formats of {len(tier_paths)} files {label}")
            continue
        known = {f.text for f in kept}
        more = [f for f in extract_log_formats(res, tier_paths) if f.text not in known]
        if size + sum(_entry_size(f) for f in more) > budget:
            notes.insert(0, f"dropped {len(more)} log formats {label}")
            continue
        kept = sorted(kept + more, key=lambda f: f.text)
        size += sum(_entry_size(f) for f in more)
    for label, drop in ENTRY_TIERS:
        if size <= budget:
            break
        gone = [f for f in kept if drop(f)]
        if gone:
            kept = [f for f in kept if not drop(f)]
            size = base + sum(_entry_size(f) for f in kept)
            notes.append(f"dropped {len(gone)} log formats {label}")
    if size > budget:
        notes.append(f"still {size // 1000} KB, over the {budget // 1000} KB budget")
    return kept, notes


def _entry_size(f: LogFormat) -> int:
    return len(json.dumps({"source": f.source, "text": f.text, "via": f.via}, ensure_ascii=False).encode()) + 4


def args_line(res: Resolver, pkg: Package, formats: list[LogFormat]) -> dict[str, Any] | None:
    """How the server logs its arguments at start: SGLang `server_args=ServerArgs(...)` (a dataclass repr) or
    `server_args={...}` (a dict); vLLM `non-default args: {...}` or `args: Namespace(...)`."""
    if pkg.server == "sglang":
        for path in SGLANG_ARGS_FILES:
            tree = pkg.tree_of(path) if path in pkg.sources else None
            if tree is None:
                continue
            for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                got = _sglang_args_call(res, path, call)
                if got is not None:
                    return got
        return None
    # `args: %s` is too short to be kept as a log format: look for the two calls themselves
    found: dict[str, dict[str, Any]] = {}
    for path in pkg.paths():
        if not path.startswith("vllm/entrypoints/") or "args: %s" not in pkg.sources[path]:
            continue
        tree = pkg.tree_of(path)
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)) if tree is not None else ():
            if (isinstance(call.func, ast.Attribute) and call.func.attr == "info" and len(call.args) == 2
                    and isinstance(call.args[0], ast.Constant) and call.args[0].value in _VLLM_ARGS_LINES):
                form = _VLLM_ARGS_LINES[call.args[0].value]
                found.setdefault(form, {"form": form, "text": call.args[0].value.replace("%s", "{}"),
                                        "source": f"{path}:{call.lineno}"})
    return found.get("non_default_dict") or found.get("namespace")


def _sglang_args_call(res: Resolver, path: str, call: ast.Call) -> dict[str, Any] | None:
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "info" and call.args
            and isinstance(call.args[0], ast.JoinedStr)):
        return None
    msg = call.args[0]
    values = msg.values
    first = values[0] if values else None
    if not (isinstance(first, ast.Constant) and str(first.value).startswith("server_args")):
        return None
    field = next((v for v in values if isinstance(v, ast.FormattedValue)), None)
    if field is None:
        return None
    form = "unknown"
    if isinstance(field.value, ast.Name):
        form = "dataclass"  # `f"{server_args=}"`: the record's repr, `ServerArgs(tp_size=1, ...)`
    elif isinstance(field.value, ast.Call):
        form = _returns_dict(res, path, field.value)
    module_tree = ast.Module(body=[ast.Expr(call)], type_ignores=[])
    texts = [f.text for f in messages_of_module(module_tree, path)]
    return {"form": form, "text": texts[0] if texts else "", "source": f"{path}:{call.lineno}"}


def _returns_dict(res: Resolver, path: str, call: ast.Call) -> str:
    name = dotted(call.func).rsplit(".", 1)[-1]
    if "dict" in name.lower():
        return "dict"
    from tui.serverfacts.wheel import module_name

    fn = res.ref(call.func, Scope(module_name(path)))
    if isinstance(fn, FuncRef) and fn.node.returns is not None:
        kinds = {a.kind for a in type_atoms(res, fn.node.returns, Scope(fn.module))}
        if kinds == {"dict"}:
            return "dict"
    if isinstance(fn, FuncRef):
        returns = [n.value for n in ast.walk(fn.node) if isinstance(n, ast.Return) and n.value is not None]
        if returns and all(isinstance(r, ast.Dict | ast.DictComp) for r in returns):
            return "dict"
    return "unknown"


def version_line(server: str, formats: list[LogFormat]) -> dict[str, Any] | None:
    """The log line that states the server's version (vLLM: `vLLM API server version {}`, later `vLLM server
    version {}, serving model {}`). SGLang logs none: it reports `version` in its server-info JSON."""
    if server != "vllm":
        return None
    hits = [f for f in formats if re.match(r"vLLM (API )?server version \{\}", f.text)]
    if not hits:
        return None
    best = sorted(hits, key=lambda f: ("serving model" not in f.text, f.source))[0]
    return {"source": best.source, "text": best.text}


def dumps(facts: dict[str, Any]) -> str:
    """Sorted keys, one list entry per line: small files whose refresh diffs read line by line."""
    parts = []
    for key in sorted(facts):
        value = facts[key]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            body = ",\n".join("  " + json.dumps(v, sort_keys=True, ensure_ascii=False) for v in value)
            text = "[\n" + body + "\n ]"
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        parts.append(f" {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
