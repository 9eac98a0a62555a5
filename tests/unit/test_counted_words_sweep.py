"""Counted words in the sweep, bench, multi-node and probe messages (issue 28): "1 configuration failed", "warmup 1
request", never "1 configurations" or "attempt(s)". Each message is driven with a count of one and of two, through
the function that writes it. One short sweep on the simulated server runs the runner's own lines end to end:
tests/e2e/test_sweep_e2e.py."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

import tui.ops.bench
from tests.helpers.sweep_records import SPECS, Sweep, clean
from tui.cli.args import UsageError
from tui.cli.commands import cmd_bench
from tui.cli.sweep import _dry_run, echo_text, end_lines
from tui.collectors.probes import Prober
from tui.managers.multinode import MultiNodeManager, Node
from tui.ops.bench import render
from tui.sweep.board import CellView, Mark, board
from tui.sweep.charts import render_report
from tui.sweep.live import LiveSweep
from tui.sweep.load import failed_requests
from tui.sweep.plan import parse_plan
from tui.sweep.results import ConfigRecord, FailureInfo, cell_id, read_results
from tui.sweep.runner import SweepResult
from tui.sweep.summary import summary_md
from widgets.sweep import cell_detail, config_detail, head_text


def plan_text(n: int) -> str:
    """A plan of `n` configurations and `n` cells (`n` concurrency levels), `n` requests a cell, `n` warmup."""
    configs = "".join(f'[[configs]]\nname = "c{i}"\n' for i in range(n))
    levels = ", ".join(str(c) for c in range(1, n + 1))
    return (f"{configs}[matrix]\nprompt_tokens = [16]\noutput_tokens = [8]\nconcurrency = [{levels}]\n"
            f"requests = {n}\nwarmup_requests = {n}\n")


def test_the_dry_run_counts_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    _dry_run("k26", parse_plan(plan_text(1), SPECS), False)
    one = capsys.readouterr().out
    assert "1 configuration x 1 cell\n" in one and ", 1 request\n" in one, one
    assert "warmup 1 request per configuration" in one, one
    clean(one)
    _dry_run("k26", parse_plan(plan_text(2), SPECS), False)
    two = capsys.readouterr().out
    assert "2 configurations x 2 cells\n" in two and ", 2 requests\n" in two, two
    assert "warmup 2 requests per configuration" in two, two


@pytest.mark.parametrize(("n", "want"), [
    (1, "sweep done: 1 valid cell, 0 invalid, 1 configuration failed (a)"),
    (2, "sweep done: 2 valid cells, 0 invalid, 2 configurations failed (a, b)"),
])
def test_the_sweeps_end_line_counts_in_words(n: int, want: str) -> None:
    r = SweepResult("done", Path("out"), "done", valid_cells=n, failed_configs=["a", "b"][:n])
    assert end_lines(r, Path("out"))[0] == want


@pytest.mark.parametrize(("n", "word"), [(1, "attempt"), (2, "attempts")])
def test_a_failed_configuration_line_counts_its_attempts(n: int, word: str) -> None:
    said: list[str] = []
    echo_text({"type": "config", "config": "c0", "status": "failed", "attempts": n,
               "failure": {"kind": "oom", "phase": "loading", "hint": "fewer"}}, said.append)
    assert said == [f"config c0: FAILED after {n} {word}: oom in loading; hint: fewer"]


def test_a_cells_failed_requests_reason_counts_in_words() -> None:
    assert failed_requests(1, 0) == "every request failed (1)"
    assert failed_requests(1, 1) == "1 of 2 requests failed"
    assert failed_requests(0, 1) == ""
    assert failed_requests(2, 1) == "2 of 3 requests failed"


def _one_config_sweep(d: Path, attempts: int) -> Sweep:
    s = Sweep(d, ["c0", "bad"], [cell_id(16, 8, 1, 1)])
    s.config("c0")
    s.cell("c0", cell_id(16, 8, 1, 1), 100.0)
    s.at += 1
    s.rec.append(ConfigRecord("bad", {}, ("sglang",), "inv-bad", "failed", attempts,
                              FailureInfo("loading", "oom", ("out of memory",), "fewer"), {}, None, s.at).to_json())
    return s


@pytest.mark.parametrize("n", [1, 2])
def test_the_report_the_view_and_the_summary_count_in_words(tmp_path: Path, n: int) -> None:
    s = _one_config_sweep(tmp_path, attempts=n)
    res = read_results(tmp_path)
    out = render_report(res, 120, 40)
    assert "2 configurations x 1 cell," in out, out
    assert f"bad: failed in loading (oom) after {n} attempt{'s' if n == 2 else ''}" in out, out
    clean(out)
    live = LiveSweep.from_results(res)
    b = board(live, s.at)
    head = head_text(b, live, s.at).plain
    assert "1/1 cell" in head, head
    clean(head)
    rec = res.cell("c0", cell_id(16, 8, 1, 1))
    assert rec is not None
    # the cell's detail in the console, of one request and of two
    for k in (1, 2):
        one = replace(rec, metrics=replace(rec.metrics, completed=k))
        detail = cell_detail("c0", one.cell, CellView(Mark.VALUE, "100.0", one)).plain
        assert f"  {k} request{'s' if k == 2 else ''}" in detail, detail
    assert "It rests on 8 requests, 1 repeat." in summary_md(res)
    clean(summary_md(res))
    rec2 = res.config_record("bad")
    assert rec2 is not None
    assert ("2 attempts" in config_detail("bad", rec2, "failed").plain) == (n == 2)


def test_the_eta_counts_cells_and_bring_ups_in_words(tmp_path: Path) -> None:
    """One cell left and one bring-up left; then two of each."""
    for n in (1, 2):
        d = tmp_path / str(n)
        names = [f"c{i}" for i in range(n + 1)]
        cells = [cell_id(16, 8, c, 1) for c in range(1, n + 2)]
        s = Sweep(d, names, cells)
        s.config(names[0])
        for cid in cells[:1]:
            s.cell(names[0], cid, 100.0)
        # configuration 0 has n cells left, the others are not up yet: n bring-ups
        live = LiveSweep.from_results(read_results(d))
        b = board(live, s.at)
        assert b.eta is not None and b.eta.bringups_left == n
        head = head_text(b, live, s.at).plain
        assert f"+ {n} bring-up{'s' if n == 2 else ''})" in head, head
        assert f"1/{(n + 1) ** 2} cells" in head  # never one in all
        out = render_report(read_results(d), 120, 40)
        left = b.eta.cells_left
        assert f"({left} cell{'s' if left != 1 else ''} left," in out, out
        clean(head)


def test_the_summary_says_one_requests_spread_in_the_singular(tmp_path: Path) -> None:
    s = Sweep(tmp_path, ["a", "b"], [cell_id(16, 8, 1, 1)])
    for name, v in (("a", 100.0), ("b", 99.0)):
        s.config(name)
        s.cell(name, cell_id(16, 8, 1, 1), v, tpots=(0.030, 0.040))  # two requests
    md = summary_md(read_results(tmp_path))
    assert "its 2 requests' TPOT" in md and "Each rests on 2 requests, 1 repeat." in md, md
    s2 = Sweep(tmp_path / "one", ["a"], [cell_id(16, 8, 1, 1)])
    s2.config("a")
    s2.cell("a", cell_id(16, 8, 1, 1), 100.0, tpots=(0.030,))
    md = summary_md(read_results(tmp_path / "one"))
    assert "It rests on 1 request, 1 repeat." in md, md
    clean(md)


@pytest.mark.parametrize("n", [1, 2])
def test_bench_render_counts_tokens_in_words(n: int) -> None:
    text = render({"model": "m", "endpoint": "http://x", "prompt_tokens": n, "max_tokens": n, "levels": []})
    s = "s" if n == 2 else ""
    assert f"(prompt ~{n} token{s}, max {n} new token{s})" in text, text


@pytest.mark.parametrize("n", [1, 2])
def test_a_multinode_target_counts_its_nodes(n: int) -> None:
    nobody = SimpleNamespace(kind="process", target="process python3")
    m = MultiNodeManager([Node(f"n{i}", nobody) for i in range(n)], ())  # type: ignore[arg-type]
    assert m.target.startswith(f"process python3 on {n} node{'s' if n == 2 else ''} ("), m.target


@pytest.mark.parametrize("n", [1, 2])
def test_the_generate_probe_counts_its_tokens(n: int) -> None:
    async def go() -> str:
        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json={"choices": [{"text": "OK"}], "usage": {"completion_tokens": n}})

        p = Prober("http://probe.invalid")
        await p.client.aclose()
        p.client = httpx.AsyncClient(base_url="http://probe.invalid", transport=httpx.MockTransport(answer))
        p.model_id = "m"
        try:
            return (await p.generate()).detail
        finally:
            await p.close()

    assert asyncio.run(go()) == f"{n} token{'s' if n == 2 else ''}"


def test_bench_keeps_the_one_concurrency_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bringup bench` checks against tui.ops.bench.MAX_CONCURRENCY, the limit a sweep's plan is held to, and names it:
    lowered here, so a literal 1024 in the check would let 16 through."""
    monkeypatch.setattr(tui.ops.bench, "MAX_CONCURRENCY", 8)
    args = argparse.Namespace(concurrency="1,16", prompt_tokens=16, max_tokens=8, requests=None, deployment="x",
                              timeout=5.0, json=False)
    with pytest.raises(UsageError, match=r"between 1 and 8$"):
        asyncio.run(cmd_bench(None, args))  # type: ignore[arg-type]  # refused before any setting is read
