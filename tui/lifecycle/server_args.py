"""The server's flags, read back from the line in which it prints them at start-up.

A recorded log has no unit to ask for the command line, but both servers print their arguments as their first
words: SGLang `server_args=ServerArgs(model_path='...', tp_size=8, speculative_algorithm='DFLASH', ...)` (every
field, defaults included), vLLM `non-default args: {'model': '...', 'tensor_parallel_size': 2}` (0.10+) or
`args: Namespace(model='...', ...)` (older). Each field becomes the option the server's argument parser reads it
from (`tp_size` -> `--tp-size 8`, a true switch `--disable-cuda-graph`, a false or unset one nothing), so a replay
knows the flags the live console knows from the unit's argv, and a failure gets the same hint (DFLASH + CUDA
graphs). Pure: text in, argv out; never raises.
"""

from __future__ import annotations

import ast
import json
import re

__all__ = ["argv_from_fields", "argv_from_line", "fields_from_line"]

#: where the arguments begin: SGLang's dataclass repr, vLLM's dict of non-default args, older vLLM's Namespace
_SGLANG = re.compile(r"(?:^|\s)server_args=(?P<call>ServerArgs\(.*)$")
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


def _simple(pattern: re.Pattern[str], text: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for m in pattern.finditer(text):
        try:
            out[m["key"]] = ast.literal_eval(m["value"])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    return out


def fields_from_line(text: str) -> dict[str, object] | None:
    """The argument fields a server's start-up line prints, or None when the line prints none."""
    if len(text) > _MAX or "args" not in text:
        return None
    m = _SGLANG.search(text)
    if m:
        return _from_call(m["call"].rstrip())
    m = _VLLM_DICT.search(text)
    if m:
        return _from_dict(m["dict"].rstrip())
    m = _VLLM_NAMESPACE.search(text)
    if m:
        return _from_call(m["call"].rstrip())
    return None


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


def argv_from_line(text: str) -> tuple[str, ...] | None:
    """The server's flags as an argv, from its start-up arguments line; None for any other line."""
    fields = fields_from_line(text)
    if not fields:
        return None
    return argv_from_fields(fields)
