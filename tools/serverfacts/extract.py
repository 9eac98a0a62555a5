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

from tools.serverfacts.logformats import LogFormat, extract_log_formats, messages_of_module
from tools.serverfacts.metrics import extract_metrics
from tools.serverfacts.options import extract_options
from tools.serverfacts.refs import FuncRef, Scope, dotted
from tools.serverfacts.routes import extract_routes
from tools.serverfacts.symbols import Resolver
from tools.serverfacts.types import type_atoms
from tools.serverfacts.wheel import Package, WheelError, read_wheel

SCHEMA = 1
SERVERS = ("sglang", "vllm")
SIZE_BUDGET = 500_000  # a check, not a cut: a file over it is reported


def _dirs(*names: str) -> re.Pattern[str]:
    return re.compile("|".join(names))


# ONE drop policy for every release (never by file size, so a check never depends on how big a release is): the
# facts keep every logging call and every exception message of the server's runtime code, and drop, always:
_SIDE = _dirs(r"(^|/)(tests?|testing|benchmarks?|bench|examples?|third_party|_vendor|vendor(ed)?)/",
              r"(^|/)test_[^/]*\.py$", r"(^|/)conftest\.py$")
_OTHER_PROGRAMS = _dirs(r"^sglang/(multimodal_gen|kernels|jit_kernel|eval|lang|test)/", r"/(debug_utils|tools)/",
                        r"/(kernels|jit_kernels?|kernel_plugins|rust_extensions)/", r"^vllm/vllm_flash_attn/",
                        r"/\.agents/", r"^vllm/(benchmarks|entrypoints/cli/benchmark)/", r"^sglang/(bench_|profiler)")
_PER_MODEL = _dirs(r"(^|/)models/", r"^sglang/srt/(layers|hardware_backend|configs|multimodal)/",
                   r"^vllm/model_executor/layers/", r"^vllm/transformers_utils/(configs|processors)/",
                   r"^vllm/multimodal/", r"^vllm/(tool_parsers|reasoning)/", r"^sglang/srt/(function_call|parser)/",
                   r"^vllm/entrypoints/openai/(tool_parsers|reasoning_parsers)/")
_PROGRAMMING_ERRORS = ("NotImplementedError", "TypeError", "AttributeError", "AssertionError", "KeyError",
                       "IndexError", "NameError", "UnboundLocalError")
DROPPED_FILES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("test/benchmark/example/vendored code", _SIDE),
    ("the wheel's other programs (SGLang's diffusion runtime, kernels, tools; vLLM's benchmarks)", _OTHER_PROGRAMS),
    ("per-model code (models/, model-specific layers, configs, multimodal processors, tool/reasoning parsers)",
     _PER_MODEL),
)
DROPPED_ENTRIES: tuple[tuple[str, Callable[[LogFormat], object]], ...] = (
    (f"bug-signalling exceptions ({', '.join(_PROGRAMMING_ERRORS)})",
     lambda f: f.via.startswith("raise ") and f.via[6:] in _PROGRAMMING_ERRORS),
    ("debug-level logging", lambda f: "debug" in f.via),
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
                     "source": opts.source, **opts.refusal.as_facts()},
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
    facts["log_formats"] = group_by_file(formats)
    facts["args_line"] = args_line(res, pkg, formats)
    facts["version_line"] = version_line(pkg.server, formats)
    notes.extend(dropped)
    return facts, notes


def fit_budget(res: Resolver, base: int, budget: int) -> tuple[list[LogFormat], list[str]]:
    """The log formats the facts keep, by the one drop policy (DROPPED_FILES, DROPPED_ENTRIES): what is dropped
    never depends on size; notes say how much went, and whether the file is still over `budget`."""
    notes: list[str] = []
    rest = res.pkg.paths()
    for label, pattern in DROPPED_FILES:
        gone = [p for p in rest if pattern.search(p)]
        rest = [p for p in rest if not pattern.search(p)]
        if gone:
            notes.append(f"dropped {len(gone)} files of {label}")
    kept = extract_log_formats(res, rest)
    for label, drop in DROPPED_ENTRIES:
        gone_f = [f for f in kept if drop(f)]
        kept = [f for f in kept if not drop(f)]
        if gone_f:
            notes.append(f"dropped {len(gone_f)} log formats of {label}")
    size = base + len(_log_formats_json(kept).encode())
    if size > budget:
        notes.append(f"{size // 1000} KB, over the {budget // 1000} KB budget")
    return kept, notes


def group_by_file(formats: list[LogFormat]) -> list[dict[str, Any]]:
    """`{"file": path, "entries": [[line, via, text], ...]}` per source file (sorted by path, then line)."""
    files: dict[str, list[list[Any]]] = {}
    for f in formats:
        path, _, line = f.source.rpartition(":")
        files.setdefault(path, []).append([int(line), f.via, f.text])
    return [{"file": p, "entries": sorted(e, key=lambda x: (x[0], x[2]))} for p, e in sorted(files.items())]


def _log_formats_json(formats: list[LogFormat]) -> str:
    return _dumps_log_formats(group_by_file(formats))


def _compact(v: Any) -> str:
    return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _dumps_log_formats(groups: list[dict[str, Any]]) -> str:
    """One log format a line: `{"file":...,"entries":[` then `[line,via,text]` lines."""
    if not groups:
        return "[]"
    out = []
    for g in groups:
        body = ",\n".join(_compact(e) for e in g["entries"])
        out.append('{"file":' + json.dumps(g["file"], ensure_ascii=False) + ',"entries":[\n' + body + "]}")
    return "[\n" + ",\n".join(out) + "\n]"


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
    from tools.serverfacts.wheel import module_name

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
    """Sorted keys, one list entry per line (one log format per line), compact records: small files whose refresh
    diffs read line by line."""
    parts = []
    for key in sorted(facts):
        value = facts[key]
        if key == "log_formats" and isinstance(value, list):
            text = _dumps_log_formats(value)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            text = "[\n" + ",\n".join(_compact(v) for v in value) + "\n]"
        else:
            text = _compact(value)
        parts.append(f"{json.dumps(key)}:{text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
