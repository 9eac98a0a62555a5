"""The console as its Pilot tests read it, through Textual's public API only: what the screen shows as text (read
from `App.export_screenshot`, the SVG a snapshot test compares), the notifications it gives (recorded as
`App.notify` is called), the full console on the simulated deployment's real Engine, and fixed states fed to it."""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import pytest
from rich.cells import cell_len
from textual.app import App
from textual.geometry import Region

from tests.helpers import console_states as cs
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated, RestartStepped
from tui.engine import Engine
from tui.engine.updates import GpusSampled, LogsRead, PhaseChanged, ThroughputSampled
from tui.lifecycle.lines import line_kinds
from tui.model import LogLine, Phase
from tui.ops import restart as protocol

# ------------------------------------------------------------------------------------------ the screen as text

#: one run of text in Rich's SVG export: its x (pixels), its width and its row (the clip path of its line)
_TEXT = re.compile(r'<text class="[^"]*-r\d+" x="([\d.]+)" y="[\d.]+" textLength="([\d.]+)" '
                   r'clip-path="url\(#[^)]*-line-(\d+)\)">(.*?)</text>')


def screen_cells(app: App[Any]) -> list[list[str]]:
    """The screen, row by row and cell by cell, as a full repaint draws it now (a wide character's second cell is
    ''): the text of `app.export_screenshot()`, the SVG Rich writes of the same render a terminal gets."""
    width, height = app.size
    rows: list[list[str]] = [[" "] * width for _ in range(height)]
    runs = [(float(x), float(length), int(row), html.unescape(text).replace("\xa0", " "))
            for x, length, row, text in _TEXT.findall(app.export_screenshot(simplify=True))]
    # the width of one cell in the SVG: a run's width over its cells (Rich writes every run at a whole cell)
    cell_px = next((length / cell_len(text) for _, length, _, text in runs if cell_len(text)), 1.0)
    for x, _, row, text in runs:
        col = round(x / cell_px)
        for ch in text:
            if not 0 <= row < height or col >= width:
                break
            rows[row][col] = ch
            if cell_len(ch) == 2 and col + 1 < width:
                rows[row][col + 1] = ""
            col += max(cell_len(ch), 1)
    return rows


def screen_lines(app: App[Any]) -> list[str]:
    return ["".join(row) for row in screen_cells(app)]


def screen_text(app: App[Any]) -> str:
    """What the screen shows now, as text, one line a row (every row its full width, as a terminal has it)."""
    return "\n".join(screen_lines(app))


def region_text(app: App[Any], region: Region) -> str:
    """What the screen shows now within `region` only."""
    return "\n".join("".join(row[region.x:region.right]) for row in screen_cells(app)[region.y:region.bottom])


# ------------------------------------------------------------------------------------------ the notifications


@dataclass
class Note:
    message: str
    title: str
    severity: str


def record_notes(app: App[Any]) -> list[Note]:
    """Every notification the app gives from now on, in order (each is still shown): `App.notify` is where every
    widget's and screen's `notify` goes."""
    notes: list[Note] = []
    real = app.notify

    def notify(message: str, **kw: Any) -> None:
        notes.append(Note(str(message), kw.get("title", ""), kw.get("severity", "information")))
        real(message, **kw)

    app.notify = notify  # type: ignore[method-assign]
    return notes


def messages(notes: list[Note]) -> list[str]:
    return [n.message for n in notes]


#: what each app has shown, recorded by `record_shown_notifications` at Textual's own `App.notify` (after the
#: console's redactor: the words as they reach the screen)
_SHOWN: WeakKeyDictionary[App[Any], list[Note]] = WeakKeyDictionary()


def record_shown_notifications(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, every notification any app shows is recorded, in order, as shown (tests/console/conftest.py
    does this for every console test): read with `shown(app)`."""
    real = App.notify

    def notify(self: App[Any], message: str, **kw: Any) -> None:
        _SHOWN.setdefault(self, []).append(Note(str(message), kw.get("title", ""), kw.get("severity", "information")))
        real(self, message, **kw)

    monkeypatch.setattr(App, "notify", notify)


def shown_notes(app: App[Any]) -> list[Note]:
    return list(_SHOWN.get(app, ()))


def shown(app: App[Any]) -> list[str]:
    """The messages of every notification `app` has shown so far, in order."""
    return messages(shown_notes(app))


# ------------------------------------------------------------------------------------------ the console


def console(tmp_path: Path) -> tuple[ControlConsoleApp, Engine]:
    """The full console on the sim deployment's real Engine, its collectors not started."""
    settings = settings_for(tmp_path)
    app = ControlConsoleApp(settings, "sim", live=False)
    w = Engine(settings, "sim", settings.deployments["sim"])
    app.engine = w
    return app, w


def failed_own_restart(steps: tuple[str, ...] = ("lock", "flags", "stop", "release", "start")) -> protocol.Outcome:
    """This console's restart: it took the lock, wrote the flags, started, and the new run failed."""
    done = tuple(protocol.Step(s, "done", s) for s in steps)
    return protocol.Outcome(protocol.Result.FAILED, Phase.FAILED, "failed in warmup: cuda-graph", failure=cs.FAILURE,
                            steps=(*done, protocol.Step("follow", "failed", "failed in warmup: cuda-graph")))


def feed(phase: Phase, *, gib: float, util: float, failure: bool = False, steps: bool = False,
         tps: bool = False, logs: bool = False) -> Callable[[Any], Awaitable[None]]:
    """A snapshot test's `run_before`: the console shown the fixed state of `phase` (tests/helpers/console_states.py)
    as the engine would push it, drawn and settled."""
    async def run_before(pilot: Any) -> None:
        app = pilot.app
        snap = cs.snapshot(phase, failure=cs.FAILURE if failure else None)
        app.post_message(EngineUpdated(PhaseChanged(snap)))
        app.post_message(EngineUpdated(GpusSampled(cs.gpus(gib, util), cs.history(gib))))
        if tps:
            sample, hist = cs.throughput()
            app.post_message(EngineUpdated(ThroughputSampled(sample, tuple(hist))))
        if logs:
            app.post_message(EngineUpdated(LogsRead(tuple(LogLine(at=cs.T0, text=t) for t in cs.LOG_LINES),
                                                    line_kinds(cs.LOG_LINES))))
        if steps:
            for s in cs.RESTART_STEPS:
                app.post_message(RestartStepped(s))
        n_steps = len(cs.RESTART_STEPS) if steps else 0
        assert await until(pilot, lambda: app.shown.snap is snap and app.shown.gpu_snap is not None
                           and (app.shown.tp is not None or not tps) and len(app.shown.steps) == n_steps)
        app.render_all()
        app.render_throughput(force_plot=True)
        await settled(pilot)

    return run_before
