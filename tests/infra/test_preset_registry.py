"""The registry of server types (tui/lifecycle/presets/registry.py) against ARCHITECTURE.md's list of what a new
preset must provide ("Where to add things"): every registered preset provides each item, typed, with its fixtures;
and no module outside tui/lifecycle/presets knows a server by its name (the source tree is scanned)."""

from __future__ import annotations

import ast
import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tui.collectors.metrics import MetricsRates, from_log_line, parse_metrics
from tui.lifecycle.presets import Alternation, Classifier, FlagSpec, Marker, Preset, get_preset, preset_names
from tui.lifecycle.presets.registry import PRESETS, display_names
from tui.lifecycle.presets.telemetry import MemoryBudget, MetricsHint, MetricsSpec, RankRule, Series
from tui.lifecycle.replay import detect_preset

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
EXPECTED = json.loads((FIX / "logs" / "expected.json").read_text(encoding="utf-8"))
NAMES = sorted(PRESETS)



def _parse(f: Path) -> ast.Module:
    """A source file's tree. CPython 3.11.7 can refuse a valid file with "AST constructor recursion depth mismatch"
    once a RecursionError happened earlier in the same process (gh-106905, fixed in 3.11.8): the replay tests provoke
    one on purpose, so on that error the file is parsed again by a fresh interpreter."""
    try:
        return ast.parse(f.read_text(encoding="utf-8"), str(f))
    except SystemError:
        code = "import ast, pickle, sys; sys.stdout.buffer.write(pickle.dumps(ast.parse(open(sys.argv[1]).read())))"
        out = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, check=True).stdout
        tree = pickle.loads(out)
        assert isinstance(tree, ast.Module)
        return tree

def test_the_registry_is_the_one_list() -> None:
    assert NAMES, "no preset registered"
    assert preset_names() == tuple(PRESETS)
    assert display_names() == tuple(p.display_name for p in PRESETS.values())
    for name, p in PRESETS.items():
        assert isinstance(p, Preset)
        assert p.name == name and get_preset(name) is p
    with pytest.raises(KeyError, match="known: " + ", ".join(PRESETS)):
        get_preset("no-such-server")


@pytest.mark.parametrize("name", NAMES)
def test_a_preset_provides_its_lifecycle(name: str) -> None:
    p = PRESETS[name]
    assert isinstance(p.display_name, str) and p.display_name, "display_name: the server's own name, for messages"
    assert p.markers and all(isinstance(m, Marker) for m in p.markers)
    assert isinstance(p.ready, Alternation) and isinstance(p.fatal, Alternation)
    assert p.classifiers and all(isinstance(c, Classifier) for c in p.classifiers)
    assert callable(p.hint)
    assert p.flags and all(isinstance(f, FlagSpec) for f in p.flags)


@pytest.mark.parametrize("name", NAMES)
def test_a_preset_provides_what_the_server_says_about_its_work(name: str) -> None:
    p = PRESETS[name]
    m = p.metrics
    assert isinstance(m, MetricsSpec), "metrics: which /metrics series are which figure"
    assert m.decode_tokens is not None or m.tokens_per_s is not None, "a tokens/s figure (a counter or a gauge)"
    assert m.running is not None and m.queued is not None
    assert all(isinstance(s, Series) for s in m.series())
    assert isinstance(m.ranks, RankRule), "how the series of its ranks add up"
    assert m.ttft_histogram is None or isinstance(m.ttft_histogram, str)
    assert m.keep() and all(isinstance(n, str) and n for n in m.keep())
    assert callable(p.log_throughput), "log_throughput: the reader of its periodic throughput line"
    assert p.log_throughput("", 0.0) is None
    assert isinstance(p.memory_budget, MemoryBudget), "memory_budget: the flag that sizes its GPU memory"
    assert 0 < p.memory_budget.default <= 1 and p.memory_budget.share([]) == p.memory_budget.default
    assert isinstance(p.metrics_hint, MetricsHint), "metrics_hint: how its metrics are turned on"
    assert isinstance(p.detection, re.Pattern), "detection: lines only this server writes"
    known = {o for f in p.flags for o in f.all_options()}
    assert p.memory_budget.flag in known and p.metrics_hint.flag in known, "both are flags the preset knows"


def test_no_two_presets_claim_the_same_metric_names() -> None:
    keeps = {name: p.metrics.keep() for name, p in PRESETS.items() if p.metrics is not None}
    for a, ka in keeps.items():
        for b, kb in keeps.items():
            if a != b:
                assert not any(x.startswith(kb) for x in ka), f"{a} reads names of {b}'s"


@pytest.mark.parametrize("name", NAMES)
def test_a_preset_has_its_fixtures(name: str) -> None:
    """A real log (replayed, told apart by `detection`, its throughput lines read) and a /metrics page whose
    figures the preset reads."""
    p = PRESETS[name]
    logs = [f for f, e in EXPECTED.items() if e["preset"] == name]
    assert logs, f"no replay fixture for {name} in tests/fixtures/logs/expected.json"
    for f in logs:
        assert (FIX / "logs" / f).read_text(encoding="utf-8").startswith("# source: ")
    assert any(detect_preset((FIX / "logs" / f).read_text(encoding="utf-8").splitlines()) == name for f in logs)
    assert any(from_log_line(p, line, 0.0) is not None for f in logs
               for line in (FIX / "logs" / f).read_text(encoding="utf-8").splitlines()), \
        f"no fixture log of {name} has a throughput line its reader reads"
    pages = [t for t in sorted((FIX / "metrics").glob("*.txt")) if p.metrics is not None
             and p.metrics.claims(parse_metrics(t.read_text(encoding="utf-8")))]
    assert pages, f"no /metrics fixture of {name} in tests/fixtures/metrics/"
    for t in pages:
        assert t.read_text(encoding="utf-8").startswith("# source: ")
    assert any((s := MetricsRates(p).sample(t.read_text(encoding="utf-8"), 1.0)) is not None
               and (s.tokens_per_s is not None or s.running is not None) for t in pages)


# ------------------------------------------------------------------------------------------------ the source tree

#: where a server is named: its preset, and the registry that lists them; and the instrument product code never
#: imports (pyproject.toml's import contracts), which is about one server: the simulated SGLang server (the extractor
#: of the releases' facts is a developer's tool outside the package, tools/serverfacts/, not walked)
_ALLOWED = ("tui/lifecycle/presets/", "tui/sim/")


#: modules that still name servers, to move into the presets: reported, not failed, until then (and the test fails
#: once one no longer does, to be taken off this list). tui/lifecycle/server_args.py tags each arguments line with
#: the server that prints it and turns vLLM's fields into `vllm serve`'s argv by that tag.
_DEBT = ("tui/lifecycle/server_args.py",)


def _sources(debt: bool = False) -> list[Path]:
    return [f for d in ("tui", "widgets") for f in sorted((ROOT / d).rglob("*.py"))
            if not (p := f.relative_to(ROOT).as_posix()).startswith(_ALLOWED) and (p in _DEBT) == debt]


def _by_name(tree: ast.AST) -> list[tuple[int, str]]:
    """Comparisons of a preset's name with a string literal, tables keyed by preset names, lists of them."""
    names = set(PRESETS)
    found: list[tuple[int, str]] = []

    def is_name(n: ast.AST) -> bool:
        return isinstance(n, ast.Constant) and n.value in names

    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            literal = any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides)
            literals = [e for s in sides if isinstance(s, (ast.Tuple, ast.List, ast.Set)) for e in s.elts]
            a_name = any(isinstance(s, ast.Attribute) and s.attr == "name" and "preset" in ast.unparse(s.value).lower()
                         for s in sides)  # `e.preset.name`, `self.preset.name`
            if (literal and a_name) or any(map(is_name, sides)) or any(map(is_name, literals)):
                found.append((n.lineno, ast.unparse(n)))
        elif isinstance(n, ast.Dict) and any(k is not None and is_name(k) for k in n.keys):
            found.append((n.lineno, "a table keyed by preset names"))
        elif isinstance(n, (ast.Tuple, ast.List, ast.Set)) and sum(map(is_name, n.elts)) >= 2:
            found.append((n.lineno, "a list of presets: " + ast.unparse(n)))
        elif isinstance(n, ast.MatchValue) and is_name(n.value):
            found.append((n.lineno, "a case on a preset's name"))
    return found


def test_no_module_outside_the_presets_knows_a_server_by_name() -> None:
    found = [f"{f.relative_to(ROOT)}:{line}: {what}" for f in _sources()
             for line, what in _by_name(_parse(f))]
    assert found == [], "read it from the preset (tui/lifecycle/presets/) instead:\n" + "\n".join(found)


def test_the_scan_would_notice() -> None:
    # guard against a scan that can never fail
    for src in ('how = "--enable-metrics" if e.preset.name == "sglang" else "x"',
                'if preset != "vllm": pass',
                'ok = self.engine.preset.name == "my-server"',
                'BUDGET = {"sglang": 1, "vllm": 2}',
                'CHOICES = ("sglang", "vllm", "auto")',
                'match name:\n    case "sglang": pass'):
        assert _by_name(ast.parse(src)), src
    assert not _by_name(ast.parse('if e.phase == "ready": pass\nx = {"flag": 1}\nif preset_name == "auto": pass'))


#: the literal server names allowed outside the presets: a deployment's default preset and the demo's deployment
#: (the simulated server is SGLang's), both in configuration
_NAME_LITERALS = {"tui/config/deployments.py": 1, "tui/config/demo.py": 1}


def test_server_names_are_written_only_in_the_presets() -> None:
    """A name written anywhere else (`return "vllm" if ... else "sglang"`) is a branch on the server that its preset
    should answer."""
    seen: dict[str, list[int]] = {}
    for f in _sources():
        for n in ast.walk(_parse(f)):
            if isinstance(n, ast.Constant) and n.value in PRESETS:
                seen.setdefault(f.relative_to(ROOT).as_posix(), []).append(n.lineno)
    assert {f: len(lines) for f, lines in seen.items()} == _NAME_LITERALS, seen


def test_the_modules_that_still_name_servers_still_do() -> None:
    for f in _sources(debt=True):
        tree = _parse(f)
        assert _by_name(tree) or any(isinstance(n, ast.Constant) and n.value in PRESETS for n in ast.walk(tree)), \
            f"{f.relative_to(ROOT)} names no server any more: take it off _DEBT"
