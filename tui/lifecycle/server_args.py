"""The server's flags, read back from the line in which it prints them at start-up.

A recorded log has no unit to ask for the command line, but both servers print their arguments as their first
words: SGLang `server_args=ServerArgs(model_path='...', tp_size=8, speculative_algorithm='DFLASH', ...)` (every
field, defaults included: the dataclass's repr, 0.4 ... 0.5.18) or `server_args={'model_path': '...', 'tp_size': 8,
...}` (0.5.20+: `ServerArgs.resolved_dict()`, sglang/srt/entrypoints/engine.py), vLLM `non-default args: {'model':
'...', 'tensor_parallel_size': 2}` (0.9+) or `args: Namespace(model='...', ...)` (older). Each field becomes the
option the server's argument parser reads it from (`tp_size` -> `--tp-size 8`, a true switch `--disable-cuda-graph`,
a false or unset one nothing), but vLLM's `model_tag`, which is `vllm serve MODEL`'s positional, so a replay knows
the flags the live console knows from the unit's argv, and a failure gets the same hint (DFLASH + CUDA graphs).
Pure: text in, argv out; never raises.
"""

from __future__ import annotations

import ast
import json
import re

__all__ = ["argv_from_fields", "argv_from_line", "fields_from_line"]

#: where the arguments begin: SGLang's dataclass repr (0.5.18 and older) or dict of resolved fields (0.5.20+),
#: vLLM's dict of non-default args, older vLLM's Namespace
_SGLANG = re.compile(r"(?:^|\s)server_args=(?P<call>ServerArgs\(.*)$")
_SGLANG_DICT = re.compile(r"(?:^|\s)server_args=(?P<dict>\{.*)$")
_VLLM_DICT = re.compile(r"(?:^|\s)non-default args: (?P<dict>\{.*)$")
_VLLM_NAMESPACE = re.compile(r"(?:^|\s)args: (?P<call>Namespace\(.*)$")
#: ServerArgs of a large deployment runs to ~10 kB; nothing longer is parsed (a garbled line)
_MAX = 200_000
#: `key=value` with a plain value, for a line cut short (journald's line limit, an excerpt) where the whole
#: expression does not parse: every field before the cut still counts
_SIMPLE_FIELD = re.compile(
    r"(?:\(|, )(?P<key>[A-Za-z_]\w*)=(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|True|False|None|"
    r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?=,|\)|$)")
_SIMPLE_ITEM = re.compile(
    r"(?:\{|, )'(?P<key>[A-Za-z_]\w*)': (?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|True|False|None|"
    r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?=,|\}|$)")


_UNKNOWN = object()


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def _parse(expr: str) -> ast.expr | None:
    try:
        return ast.parse(expr, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _from_call(call: str) -> dict[str, object]:
    node = _parse(call)
    if isinstance(node, ast.Call):
        out = {}
        for kw in node.keywords:
            if kw.arg is not None:
                value = _literal(kw.value)
                if value is not _UNKNOWN:
                    out[kw.arg] = value
        return out
    return _simple(_SIMPLE_FIELD, call)


def _from_dict(text: str) -> dict[str, object]:
    node = _parse(text)
    if isinstance(node, ast.Dict):
        value = _literal(node)
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if isinstance(k, str)}
    return _simple(_SIMPLE_ITEM, text)


def _top_level(text: str) -> str:
    """The text with every nested bracket's contents replaced by `…`: the fields of a nested value (SGLang's
    `cuda_graph_config`, `{'decode': {'backend': 'full', 'max_bs': 256, ...}}` in 0.5.20+, `CudaGraphConfig(decode=
    PhaseConfig(backend='full', ...))` before) are not the server's options. Quoted text is kept as is."""
    out: list[str] = []
    depth, quote, escaped = 0, "", False
    for ch in text:
        if quote:
            if depth <= 1:
                out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            if depth <= 1:
                out.append(ch)
        elif ch in "([{":
            depth += 1
            if depth <= 1:
                out.append(ch)
            elif depth == 2:
                out.append("…")
        elif ch in ")]}":
            if depth <= 1:
                out.append(ch)
            depth = max(depth - 1, 0)
        elif depth <= 1:
            out.append(ch)
    return "".join(out)


def _simple(pattern: re.Pattern[str], text: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for m in pattern.finditer(_top_level(text)):
        try:
            out[m["key"]] = ast.literal_eval(m["value"])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    return out


def _read(text: str) -> tuple[str, dict[str, object]] | None:
    """The server whose arguments line this is, and its fields; None for any other line."""
    if len(text) > _MAX or "args" not in text:
        return None
    m = _SGLANG.search(text)
    if m:
        return "sglang", _from_call(m["call"].rstrip())
    m = _SGLANG_DICT.search(text)
    if m:
        return "sglang", _from_dict(m["dict"].rstrip())
    m = _VLLM_DICT.search(text)
    if m:
        return "vllm", _from_dict(m["dict"].rstrip())
    m = _VLLM_NAMESPACE.search(text)
    if m:
        return "vllm", _from_call(m["call"].rstrip())
    return None


def fields_from_line(text: str) -> dict[str, object] | None:
    """The argument fields a server's start-up line prints, or None when the line prints none."""
    read = _read(text)
    return read[1] if read is not None else None


def _value_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        try:
            return json.dumps(value, separators=(",", ":"), default=str)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def argv_from_fields(fields: dict[str, object]) -> tuple[str, ...]:
    """The command-line options the fields were read from: `--name value`, a true switch `--name`; false and
    unset (None) fields are left out, as a command line that does not give them."""
    argv: list[str] = []
    for key, value in fields.items():
        if value is None or value is False or value == "":
            continue
        option = "--" + key.replace("_", "-")
        if value is True:
            argv.append(option)
        else:
            argv += [option, _value_text(value)]
    return tuple(argv)


#: fields of `vllm serve`'s Namespace that are no option: the subcommand's name (`dest="subparser"`,
#: vllm/entrypoints/cli/main.py, 0.8.5 ... 0.34.0)
_VLLM_NOT_OPTIONS = ("subparser",)


def _vllm_argv(fields: dict[str, object]) -> tuple[str, ...]:
    """vLLM's fields as `vllm serve`'s argv: `model_tag` is its positional (`add_argument("model_tag", ...)`:
    vllm/entrypoints/cli/serve.py 0.8.5-0.9.2, entrypoints/openai/cli_args.py 0.10.2-0.25.0, entrypoints/launchers/
    cli_args.py 0.30.0, entrypoints/common/cli_args.py 0.33.0-0.34.0), which the serve command copies into `model`
    (`args.model = args.model_tag`, entrypoints/cli/serve.py, 0.8.5 ... 0.34.0): so the model comes first, as `vllm
    serve MODEL` takes it, and `--model` only when it is another value."""
    rest = {k: v for k, v in fields.items() if k not in _VLLM_NOT_OPTIONS}
    model = rest.pop("model_tag", None)
    if not isinstance(model, str) or not model:
        return argv_from_fields(rest)
    if rest.get("model") == model:
        del rest["model"]
    return (model, *argv_from_fields(rest))


def _sglang_resolved(fields: dict[str, object]) -> dict[str, object]:
    """0.5.20+ prints what resolution decided: with no `--cuda-graph-backend-decode` given, the decode graphs' backend
    is in `cuda_graph_config` (`{'decode': {'backend': 'full', ...}}`; sglang 0.5.23 arg_groups/cuda_graph_hook.py
    folds `--disable-cuda-graph`, `--disable-decode-cuda-graph` and that flag into it). Said as the flag it folds, so
    a hint knows the graphs were off."""
    config = fields.get("cuda_graph_config")
    decode = config.get("decode") if isinstance(config, dict) else None
    backend = decode.get("backend") if isinstance(decode, dict) else None
    if fields.get("cuda_graph_backend_decode") is None and isinstance(backend, str) and backend:
        return {**fields, "cuda_graph_backend_decode": backend}
    return fields


def argv_from_line(text: str) -> tuple[str, ...] | None:
    """The server's flags as an argv, from its start-up arguments line; None for any other line."""
    read = _read(text)
    if read is None or not read[1]:
        return None
    server, fields = read
    return _vllm_argv(fields) if server == "vllm" else argv_from_fields(_sglang_resolved(fields))
