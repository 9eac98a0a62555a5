"""Every number from outside is taken by tui/guard/numbers.py (issue 47.5 and its review's finding 7): a reader that
parses one by hand takes what Python's `int()` and `float()` take, which is more than anyone means: `float("inf")`,
`float("nan")`, `float(True)`, `int("1_0")`, `int("²")` raising where `"²".isdigit()` said yes. Each reached
bringup: a server's `inf` stamp put Infinity in the run history; a sweep's records.jsonl with `completed: Infinity`
crashed `sweep report` (OverflowError); a lock record's `since: "-inf"` and a shared-generations line `x inf inf 5`
were taken as moments.

So this walks `tui/` (the instrument `tui/sim/` aside, and the guard itself) and fails on:
- `int(...)`/`float(...)` of anything but what cannot be text: a literal, arithmetic, `len()`, `round()`, `abs()`,
  `min()`/`max()`/`sum()`, the clock (`time.*`), `math.*`, a datetime's `.timestamp()`, a class's constant
  (`ExitCode.OK`); a name, a subscript (`parts[1]`, `m[1]`, `raw["pid"]`), an attribute or a call
  (`line.split()[1]`, `raw.get("x")`) may hold text from outside, and is refused;
- `int` or `float` handed on as a parser: `map(float, parts)`, `type=float`, `sorted(xs, key=int)`.
Readers take `real`/`whole`/`epoch`/`seconds` (or their `_or_none` forms) instead. `widgets/` is not walked: it
reads nothing (lint-imports: no I/O), it draws numbers the readers took.

`ALLOWED` names the few functions that may, each with why; an entry no longer needed fails too, so the list
stays short and true.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP = ("tui/sim/", "tui/guard/numbers.py")
CONVERTERS = {"int", "float"}
#: calls whose result is a number whatever their arguments
SAFE_CALLS = {"len", "round", "abs", "min", "max", "sum"}
#: modules whose every function gives a number (a clock, math)
SAFE_MODULES = {"time", "math"}
#: calls that may be handed `int`/`float` as a type, not as a parser
TYPE_TAKERS = {"isinstance", "issubclass", "cast", "positive"}

_PENDING = "pending, to convert once the change its engineer is making lands: "
#: (module, function) -> why it may call int()/float() on something else. Functions, not lines: an entry says what
#: the function is, and a new reader elsewhere is not covered by it.
ALLOWED: dict[tuple[str, str], str] = {
    # exit codes: an IntEnum of this program's, as the number the process or `--json` gives
    ("tui/cli/__init__.py", "_main"): "the handler's exit code (an ExitCode) as the process's",
    ("tui/cli/actions.py", "_protocol"): "an ExitCode (IntEnum) as the JSON `code`",
    ("tui/cli/actions.py", "cmd_stop"): "an ExitCode (IntEnum) as the JSON `code`",
    ("tui/cli/report.py", "error"): "an ExitCode (IntEnum) as the JSON `code`",
    ("tui/cli/sweep.py", "cmd_sweep"): "an ExitCode (IntEnum) as the JSON `code`",
    # numbers this process made or took already
    ("tui/console/viewer.py", "ConsoleApp._render_changed"): "the console's own clock, cut to the second",
    ("tui/sweep/charts.py", "throughput_series"): "a concurrency tui/sweep/results.py took already (a whole number)",
    ("tui/collectors/metrics.py", "_int"): "a float `finite` has just taken, cut to a count",
    ("tui/collectors/metrics.py", "parse_metrics"):
        "prometheus_client's parsed sample, a float already (its readers take it through `finite`)",
    ("tui/transport/ssh.py", "SshTransport.run"): "the caller's timeout (a float of ours) as `timeout`'s seconds",
    ("tui/managers/systemd.py", "SystemdManager.follow"): "the run's start, a moment taken already",
    # not a number from text
    ("tui/collectors/gpu_nvml.py", "NvmlSource._one"): "NVML's C integers (ctypes), never text",
    ("tui/managers/exec_line.py", "_escape"): "systemd's \\xHH and \\OOO escapes: a byte's code from matched digits",
    ("tui/managers/supervisor.py", "main"):
        "sent to the server's host as source, it imports nothing of bringup's: its argv is bringup's own",
    ("tui/lifecycle/presets/__init__.py", "FlagSpec.validate"):
        "a flag's value checked as the server will parse it (Python's int()/float()), non-finite refused there",
    # readers of outside text in files other engineers are changing now: to convert once their change lands
    ("tui/lifecycle/presets/facts.py", "version_key"): _PENDING + "a server's stated release (issue 48's files)",
    ("tui/lifecycle/presets/telemetry.py", "to_float"): _PENDING + "a log line's value, `finite` after",
    ("tui/lifecycle/presets/telemetry.py", "to_int"): _PENDING + "`to_float`'s value, cut to a count",
    ("tui/lifecycle/presets/telemetry.py", "_rank"): _PENDING + "a rank's digits, isdigit-checked",
    ("tui/lifecycle/presets/telemetry.py", "MemoryBudget.share"): _PENDING + "a flag's value, 0 < v <= 1 after",
}


def _text_free(node: ast.expr) -> bool:
    """Whether `node` can only be a number (or a literal in the code): nothing read from outside."""
    match node:
        case ast.Constant():
            return True
        case ast.BinOp():
            return not any(isinstance(c, ast.Constant) and isinstance(c.value, str | bytes) for c in ast.walk(node))
        case ast.UnaryOp(operand=operand):
            return _text_free(operand)
        case ast.IfExp(body=body, orelse=orelse):
            return _text_free(body) and _text_free(orelse)
        case ast.Call(func=ast.Name(id=name)) if name in SAFE_CALLS:
            return True
        case ast.Call(func=ast.Attribute(value=ast.Name(id=module))) if module in SAFE_MODULES:
            return True
        case ast.Call(func=ast.Attribute(attr="timestamp"), args=[]):
            return True
        case ast.Attribute(value=ast.Name(id=owner)) if owner[:1].isupper():
            return True
    return False


class _Finder(ast.NodeVisitor):
    """The by-hand parses of one module, each with the function it is in."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.found: list[tuple[str, int, str]] = []  # (function, line, source)
        self._type_args: set[int] = set()

    def _where(self) -> str:
        return ".".join(self.scope) or "<module>"

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _function

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in CONVERTERS and node.args and not _text_free(node.args[0]):
            self.found.append((self._where(), node.lineno, ast.unparse(node)))
        if isinstance(func, ast.Name) and func.id in TYPE_TAKERS:
            self._type_args.update(id(a) for a in node.args)
        for value in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(value, ast.Name) and value.id in CONVERTERS and id(value) not in self._type_args:
                self.found.append((self._where(), node.lineno, ast.unparse(node)))
        self.generic_visit(node)


def by_hand(source: str) -> list[tuple[str, int, str]]:
    """(function, line, call) of each number parsed by hand in `source`."""
    finder = _Finder()
    finder.visit(ast.parse(source))
    return finder.found


def scan() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted((ROOT / "tui").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(SKIP):
            continue
        for where, line, call in by_hand(path.read_text(encoding="utf-8")):
            out.setdefault((rel, where), []).append(f"{rel}:{line} {call}")
    return out


def test_every_number_from_outside_goes_through_the_guard() -> None:
    found = [site for key, sites in scan().items() if key not in ALLOWED for site in sites]
    assert not found, ("a number parsed by hand (take it with tui.guard.numbers: real/whole/epoch/seconds, or their "
                       "_or_none forms):\n  " + "\n  ".join(found))


def test_every_allowance_is_still_needed() -> None:
    stale = sorted(set(ALLOWED) - set(scan()))
    assert not stale, f"allowed but parsing nothing by hand now (remove them): {stale}"


@pytest.mark.parametrize("src", [
    "x = float(line.split()[1])",
    "x = int(raw['pid'])",
    "x = int(raw.get('pid') or 0)",
    "def f(v):\n    return float(v)",
    "x = int(m[1])",
    "x = int(text, 10)",
    "x = float('0.' + digits)",
    "xs = list(map(float, parts))",
    "p.add_argument('--n', type=int)",
    "xs = sorted(names, key=int)",
    "x = int(str(obj.get('__REALTIME_TIMESTAMP')))",
])
def test_the_scan_finds_a_parse_by_hand(src: str) -> None:
    assert by_hand(src), src


@pytest.mark.parametrize("src", [
    "x = float('inf')",
    "x = int(len(xs) / 2)",
    "x = int(a * 100 + 0.5)",
    "x = float(round(y, 2))",
    "x = int(time.time())",
    "x = int(ExitCode.OK)",
    "x = isinstance(v, int | float) or isinstance(v, (int, float))",
    "t = positive(float, 'seconds')",
    "x: int = 3",
])
def test_numbers_that_cannot_be_text_are_no_parse(src: str) -> None:
    assert not by_hand(src), src
