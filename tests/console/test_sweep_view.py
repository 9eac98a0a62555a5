"""The sweep view and report: results directories written by hand as the runner writes them (the seeds' DFlash
sweep: four configurations, one failing with CUDA graphs, one cell invalidated by a restart), read as they grow.

The charts and the matrix are pure functions of the records; the view is driven through Textual's Pilot while lines
are appended to records.jsonl, and every wait is on a condition (the screen counts its polls), never a fixed sleep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

import tui.screens.sweep as sweep_screen
from tests.helpers.pilot import until
from tests.helpers.simdeploy import settings_for
from tui.app import ConsoleApp
from tui.screens.sweep import SweepScreen
from tui.sweep.board import Mark, board
from tui.sweep.charts import (
    matrix_text,
    pareto_front,
    pareto_points,
    render_report,
    report_text,
    throughput_series,
    workloads,
)
from tui.sweep.live import LineBuffer, LiveSweep
from tui.sweep.results import pointer_path, read_results
from widgets.sweep import SweepView

CONFIGS = ["budget=8,topk=4", "budget=16,topk=4", "budget=16,topk=8", "budget=32,topk=8,graphs"]
CELLS = [f"p{p}-o256-c{c}-r0" for p in (1024, 8192) for c in (1, 8, 32)]
FAILED = CONFIGS[3]
HINT = "DFlash drafts cannot be captured in CUDA graphs here: add --enforce-eager [or drop --cuda-graph-max-bs]"
EXCERPT = "[rank0]: RuntimeError: CUDA error: operation not permitted when stream is capturing"
RESTARTED = "server restarted during the cell (invocation changed)"
T0 = 1_700_000_000.0
GPUS = 8


# ------------------------------------------------------------------------------------------------- the files


def meta(d: Path, status: str = "running") -> None:
    d.mkdir(parents=True, exist_ok=True)
    raw = {"deployment": "k26", "host": "gpu-a", "started_at": T0, "original_argv": ["vllm", "serve", "k26"],
           "configs": CONFIGS, "cells": CELLS, "status": status, "pid": 4242,
           "finished_at": None if status == "running" else T0 + 4000}
    tmp = d / "sweep.json.tmp"
    tmp.write_text(json.dumps(raw))
    tmp.replace(d / "sweep.json")


def append(d: Path, *records: dict[str, Any]) -> None:
    with (d / "records.jsonl").open("a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def append_raw(d: Path, text: str) -> None:
    with (d / "records.jsonl").open("a") as f:
        f.write(text)


def steps(config: str, at: float) -> list[dict[str, Any]]:
    names = ("lock", "flags", "stop", "release", "start", "follow")
    return [{"type": "step", "config": config, "name": n, "status": "done", "detail": "", "at": at + i}
            for i, n in enumerate(names)]


def config(name: str, at: float, inv: str, failed: bool = False) -> dict[str, Any]:
    budget = name.split(",")[0].split("=")[1]
    return {"type": "config", "config": name, "at": at, "invocation": inv, "attempts": 1,
            "flags": {"speculative-config": f'{{"method": "dflash", "budget": [{budget}]}}', "enforce-eager": None},
            "argv": ["vllm", "serve", "k26"], "status": "failed" if failed else "ready",
            "failure": {"phase": "graph-capture", "kind": "cuda-graph", "excerpt": [EXCERPT], "hint": HINT}
            if failed else None,
            "gpu_mem_at_ready_mib": {} if failed else {str(g): 131_072 for g in range(GPUS)},
            "ready_s": None if failed else 412.0}


def tok_s(name: str, cell: str) -> float:
    """Made-up but shaped like the seeds' numbers: more concurrency, more tokens/s; longer prompts, fewer."""
    k = CONFIGS.index(name)
    p, c = int(cell[1:].split("-")[0]), int(cell.split("-c")[1].split("-")[0])
    return round(92.0 * c ** 0.8 * (1 + 0.07 * k) * (1.0 if p == 1024 else 0.62), 1)


def cell(name: str, cid: str, at: float, inv: str, valid: bool = True, reason: str = "",
         attempt: int = 1, **metrics: Any) -> dict[str, Any]:
    p, c = int(cid[1:].split("-")[0]), int(cid.split("-c")[1].split("-")[0])
    total = tok_s(name, cid)
    m = {"completed": 8 * c, "failed": 0, "duration_s": 38.0,
         "ttft_ms": {"mean": 210.0, "p50": 180.0, "p90": 420.0, "p99": 650.0},
         "tpot_ms": {"mean": 11.0, "p50": 10.5, "p90": 14.0, "p99": 19.0}, "itl_ms": {}, "e2el_ms": {},
         "tok_s_total": total, "tok_s_user": total / c, "tok_s_gpu": total / GPUS, "req_s": total / 256,
         "goodput_rps": None, "slo": None, "accept_len": 3.4, "accept_rate": 0.61}
    m.update(metrics)
    return {"type": "cell", "config": name, "cell": cid, "prompt_tokens": p, "output_tokens": 256,
            "concurrency": c, "repeat": 0, "valid": valid, "reason": reason, "attempt": attempt,
            "invocation": inv, "metrics": m, "at": at}


def full_sweep(d: Path) -> None:
    """The whole sweep, done: three configurations measured, the fourth failed in graph capture, one cell of the
    second invalid after a restart in the middle (its retry failed too)."""
    meta(d, "done")
    at = T0
    for k, name in enumerate(CONFIGS):
        append(d, *steps(name, at))
        at += 420
        if name == FAILED:
            append(d, config(name, at, f"inv{k}", failed=True))
            continue
        append(d, config(name, at, f"inv{k}"))
        for cid in CELLS:
            at += 40
            if k == 1 and cid == CELLS[4]:
                append(d, cell(name, cid, at, f"inv{k}", valid=False, reason=RESTARTED, attempt=2))
            else:
                append(d, cell(name, cid, at, f"inv{k}"))


def live_of(d: Path) -> LiveSweep:
    return LiveSweep.from_results(read_results(d))


# ------------------------------------------------------------------------------------------------- pure


def test_pareto_front_on_a_known_set() -> None:
    pts = [(1.0, 10.0), (2.0, 8.0), (3.0, 9.0), (4.0, 2.0), (2.0, 8.0), (0.5, 1.0), (4.0, 1.0)]
    # (2, 8) is beaten by (3, 9); (0.5, 1) by everything; (4, 1) by (4, 2); the duplicate (2, 8) too
    assert pareto_front(pts) == [0, 2, 3]
    assert pareto_front([]) == []
    assert pareto_front([(5.0, 5.0)]) == [0]
    assert pareto_front([(1.0, 1.0), (1.0, 1.0)]) == [0]  # of equal points, the first


def test_the_report_has_every_series_the_front_the_failure_and_the_invalid_cell(tmp_path: Path) -> None:
    full_sweep(tmp_path)
    out = render_report(read_results(tmp_path), 120, 40)
    assert "\x1b[" not in out  # no terminal, no colours
    for name in CONFIGS[:3]:
        assert out.count(name) >= 4, name  # the matrix, and the legend of each of the four charts
    assert out.count("Pareto front:") == 2  # one per workload
    assert f"{FAILED}: failed in graph-capture (cuda-graph)" in out
    assert EXCERPT in out and HINT in out
    assert f"{CONFIGS[1]} {CELLS[4]}: invalid: {RESTARTED}" in out
    # 7 % apart, each cell's TPOT 33 % from p50 to p90: summary.md's rule names no best, nor does the report
    assert f"no clear best (within spread): {CONFIGS[2]} 1,359 vs {CONFIGS[1]} 1,276 vs {CONFIGS[0]} 1,192 tok/s " \
           f"mean at concurrency 32; highest mean {CONFIGS[2]}" in out, out
    assert "\nbest: " not in out
    assert "[16]" in out  # the best configuration's flags, brackets and all
    colored = render_report(read_results(tmp_path), 120, 40, color=True)
    assert "\x1b[" in colored


def test_series_and_matrix_from_the_records(tmp_path: Path) -> None:
    full_sweep(tmp_path)
    live = live_of(tmp_path)
    assert workloads(live) == [(1024, 256), (8192, 256)]
    series = throughput_series(live, (1024, 256))
    assert list(series) == CONFIGS[:3]  # the failed configuration has no series
    assert [x for x, _ in series[CONFIGS[0]]] == [1.0, 8.0, 32.0]
    assert series[CONFIGS[0]][2][1] == tok_s(CONFIGS[0], "p1024-o256-c32-r0")
    # the invalid cell is in no chart
    assert [x for x, _ in throughput_series(live, (8192, 256))[CONFIGS[1]]] == [1.0, 32.0]
    points = pareto_points(live, (1024, 256))
    front = [points[i] for i in pareto_front([(p.x, p.y) for p in points])]
    assert {p.config for p in front} == {CONFIGS[2]}  # the fastest configuration beats the others everywhere
    b = board(live, T0 + 5000)
    rows = {r.name: r for r in b.rows}
    assert rows[FAILED].status == "failed (cuda-graph)"
    assert all(c.mark == Mark.NOT_RUN for c in rows[FAILED].cells)
    assert rows[CONFIGS[1]].cells[4].mark == Mark.INVALID
    assert b.eta is None  # done: no ETA
    text = matrix_text(b, 200)
    assert "✗" in text and "failed (cuda-graph)" in text and "c32" in text


def test_nothing_crashes_on_empty_one_point_or_missing_metrics(tmp_path: Path) -> None:
    assert "no configurations yet" in render_report(read_results(tmp_path / "nothing"), 80, 24)
    meta(tmp_path)
    assert "0 measured" in render_report(read_results(tmp_path), 80, 24)
    append(tmp_path, config(CONFIGS[0], T0 + 400, "inv0"),
           cell(CONFIGS[0], CELLS[0], T0 + 440, "inv0", tok_s_user=None, tok_s_gpu=None))
    out = render_report(read_results(tmp_path), 80, 24)
    assert "tokens/s total vs concurrency" in out and "Pareto front:" not in out  # no per-user figure: no point
    append(tmp_path, cell(CONFIGS[0], CELLS[1], T0 + 480, "inv0", tok_s_total=None, tok_s_user="fast"))
    append_raw(tmp_path, '{"type": "cell", "config": "x"}\nnot json\n[1, 2]\n')
    live = live_of(tmp_path)
    assert report_text(live, 60, 10)
    assert board(live, T0 + 500).eta is not None


def test_a_line_is_taken_only_once_complete_and_garbage_is_skipped() -> None:
    buf = LineBuffer()
    line = json.dumps({"type": "step", "config": "a", "name": "lock", "status": "done", "at": 1.0}).encode()
    assert buf.feed(line[:10]) == []
    assert buf.feed(line[10:]) == []  # complete JSON, but no newline yet: still being written
    assert buf.feed(b"\n") == [json.loads(line)]
    assert buf.feed(b"garbage\n\n[1]\n" + "é".encode()[:1]) == []
    assert buf.skipped == 2
    assert buf.feed("é".encode()[1:] + b"\n") == []  # a character cut in two, joined again (and not JSON)


# ------------------------------------------------------------------------------------------------- the view


class Host(App[None]):
    CSS_PATH = Path(__file__).resolve().parents[2] / "tui" / "app.tcss"

    def __init__(self, d: Path, clock: Callable[[], float]) -> None:
        super().__init__()
        self.d = d
        self.clock = clock

    def on_mount(self) -> None:
        self.push_screen(SweepScreen(self.d, clock=self.clock))


def shown(screen: SweepScreen, name: str, cid: str) -> str:
    table = screen.query_one("#sweep-matrix", DataTable)
    value = table.get_cell(name, cid)
    assert isinstance(value, Text)  # never a str: DataTable reads a str as markup
    return value.plain


def static_text(screen: SweepScreen, wid: str) -> str:
    r = screen.query_one(wid, Static).render()
    return r.plain if isinstance(r, Text) else str(r)


async def polls(pilot: Pilot[Any], screen: SweepScreen, n: int) -> None:
    """Let the screen poll the directory `n` more times."""
    target = screen.polls + n
    assert await until(pilot, lambda: screen.polls >= target)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_the_matrix_fills_in_as_records_are_appended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           size: tuple[int, int]) -> None:
    monkeypatch.setattr(sweep_screen, "POLL_S", 0.05)
    d = tmp_path / "k26-20250101T000000Z"
    meta(d)
    append(d, *steps(CONFIGS[0], T0), config(CONFIGS[0], T0 + 420, "inv0"))
    now = [T0 + 430.0]
    app = Host(d, lambda: now[0])
    async with app.run_test(size=size) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.updates >= 1)
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        assert shown(screen, CONFIGS[0], CELLS[0]) == "…"  # measured now
        assert shown(screen, CONFIGS[0], CELLS[1]) == "-"
        assert shown(screen, CONFIGS[1], CELLS[0]) == "-"
        assert "ETA after the first cell" in static_text(screen, "#sweep-head")
        assert "lock ✓" in static_text(screen, "#sweep-steps")

        append(d, cell(CONFIGS[0], CELLS[0], T0 + 460, "inv0"))
        value = f"{tok_s(CONFIGS[0], CELLS[0]):.1f}"
        assert await until(pilot, lambda: shown(screen, CONFIGS[0], CELLS[0]) == value)
        assert shown(screen, CONFIGS[0], CELLS[1]) == "…"
        head = static_text(screen, "#sweep-head")
        assert "ETA " in head and "23 cells x 40 s + 3 bring-ups" in head, head
        assert f"best so far: {CONFIGS[0]}  {value} tok/s mean at concurrency 1" in head, head

        # a line being written: not shown until its newline comes
        line = json.dumps(cell(CONFIGS[0], CELLS[1], T0 + 500, "inv0"))
        append_raw(d, line[:40])
        await polls(pilot, screen, 3)
        assert shown(screen, CONFIGS[0], CELLS[1]) == "…"
        append_raw(d, line[40:])
        await polls(pilot, screen, 3)
        assert shown(screen, CONFIGS[0], CELLS[1]) == "…"  # complete JSON, no newline yet
        append_raw(d, "\n")
        value = f"{tok_s(CONFIGS[0], CELLS[1]):.1f}"
        assert await until(pilot, lambda: shown(screen, CONFIGS[0], CELLS[1]) == value)

        # nothing appended: nothing redrawn
        updates = screen.updates
        await polls(pilot, screen, 3)
        assert screen.updates == updates

        # the rest: a failed configuration, an invalid cell
        append(d, *[cell(CONFIGS[0], c, T0 + 540 + 40 * i, "inv0") for i, c in enumerate(CELLS[2:])],
               *steps(FAILED, T0 + 800), config(FAILED, T0 + 900, "inv3", failed=True),
               *steps(CONFIGS[1], T0 + 910), config(CONFIGS[1], T0 + 1300, "inv1"),
               cell(CONFIGS[1], CELLS[0], T0 + 1340, "inv1", valid=False, reason=RESTARTED, attempt=2))
        assert await until(pilot, lambda: shown(screen, CONFIGS[1], CELLS[0]) == "✗")
        assert shown(screen, FAILED, "_status") == "failed (cuda-graph)"
        assert shown(screen, FAILED, CELLS[0]) == ""
        assert shown(screen, CONFIGS[1], CELLS[1]) == "…"

        # the invalid cell's reason, and the failed configuration's kind, excerpt and hint, on selection
        table = screen.query_one("#sweep-matrix", DataTable)
        table.move_cursor(row=table.get_row_index(CONFIGS[1]), column=table.get_column_index(CELLS[0]))
        assert await until(pilot, lambda: RESTARTED in static_text(screen, "#sweep-detail"))
        table.move_cursor(row=table.get_row_index(FAILED), column=0)
        assert await until(pilot, lambda: "cuda-graph" in static_text(screen, "#sweep-detail"))
        detail = static_text(screen, "#sweep-detail")
        assert EXCERPT in detail and "[or drop" in detail, detail  # brackets as text, not markup

        await pilot.press("g")  # the charts on the whole screen, and back
        assert await until(pilot, lambda: screen.maximized is not None)
        await pilot.press("escape")
        assert await until(pilot, lambda: screen.maximized is None)
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, SweepScreen))


async def test_the_console_opens_a_running_sweep_of_its_deployment_and_s_opens_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_screen, "POLL_S", 0.05)
    settings = settings_for(tmp_path)
    d = settings.state_path() / "sweeps" / "sim-20250101T000000Z"
    full_sweep(d)
    app = ConsoleApp(settings, "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("S")  # none running: the latest one
        assert await until(pilot, lambda: isinstance(app.screen, SweepScreen))
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, SweepScreen))

        ptr = pointer_path(settings.state_path(), "sim")
        ptr.parent.mkdir(parents=True, exist_ok=True)
        ptr.write_text(json.dumps({"dir": str(d), "pid": os.getpid()}))
        app.look_for_sweep()
        assert await until(pilot, lambda: isinstance(app.screen, SweepScreen))
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        assert await until(pilot, lambda: screen.updates >= 1)
        view = screen.query_one(SweepView)
        assert [r.name for r in view.rows_for()] == CONFIGS
        await pilot.press("S")
        assert await until(pilot, lambda: not isinstance(app.screen, SweepScreen))
        app.look_for_sweep()  # closed by the operator: not opened again by itself
        await pilot.pause()
        assert not isinstance(app.screen, SweepScreen), (app.screen_stack, app.sweeps.opened)


async def test_the_sweep_view_is_made_once_shown_again_and_polls_only_while_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """S, Esc, S: the same view, kept with what it has read; closed, it reads nothing; shown again, it reads what
    was written meanwhile at once. A newer sweep of the deployment gets a view of its own, the old one removed."""
    monkeypatch.setattr(sweep_screen, "POLL_S", 0.05)
    settings = settings_for(tmp_path)
    d = settings.state_path() / "sweeps" / "sim-20250101T000000Z"
    meta(d, "running")
    append(d, *steps(CONFIGS[0], T0), config(CONFIGS[0], T0 + 10, "inv0"))
    app = ConsoleApp(settings, "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("S")
        assert await until(pilot, lambda: isinstance(app.screen, SweepScreen))
        first = app.screen
        assert isinstance(first, SweepScreen)
        assert await until(pilot, lambda: first.updates >= 1 and first.polls >= 3)
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, SweepScreen))
        closed_at = first.polls
        append(d, cell(CONFIGS[0], CELLS[0], T0 + 60, "inv0"))  # written while no one looks
        # a witness on the same pace: five of its ticks, and the view's poll, paused, never ran
        ticks: list[int] = []
        app.set_interval(sweep_screen.POLL_S, lambda: ticks.append(1))
        assert await until(pilot, lambda: len(ticks) >= 5)
        assert first.polls == closed_at, "a closed sweep view polled its directory"
        await pilot.press("S")
        assert await until(pilot, lambda: app.screen is first)
        assert first.polls > closed_at and shown(first, CONFIGS[0], CELLS[0]) not in ("", "…")
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, SweepScreen))

        newer = settings.state_path() / "sweeps" / "sim-20250102T000000Z"
        full_sweep(newer)
        await pilot.press("S")
        assert await until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen is not first)
        assert app.screen.dir == newer  # type: ignore[attr-defined]
        assert await until(pilot, lambda: not first.is_attached), "the old view was left in the app"
