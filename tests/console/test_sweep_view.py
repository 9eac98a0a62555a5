"""The sweep view: results directories written by hand as the runner writes them (tests/helpers/sweep_files.py),
read as they grow. The view is driven through Textual's Pilot while lines are appended to records.jsonl, and every
wait is on a condition (the screen counts its polls), never a fixed sleep. The charts and the matrix, pure functions
of the records: tests/unit/test_sweep_report.py.
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
from tests.helpers.sweep_files import (
    CELLS,
    CONFIGS,
    EXCERPT,
    FAILED,
    RESTARTED,
    T0,
    append,
    append_raw,
    cell,
    config,
    full_sweep,
    meta,
    steps,
    tok_s,
)
from tui.console.viewer import ConsoleApp
from tui.screens.sweep import SweepScreen
from tui.sweep.results import pointer_path
from widgets.sweep import SweepView

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
