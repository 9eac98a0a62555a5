"""A console left open on a serving deployment writes the cells that changed, not the lines or panels they are in:
the phase's clock, a GPU's figures. What is on screen afterwards is what a whole repaint shows (a cell left out of
the repaint would keep its old figure): checked against the screen a full repaint draws."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from textual.geometry import Region

from tests.helpers import console_states as cs
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.app import ControlConsoleApp
from tui.engine.updates import GpusSampled, PhaseChanged
from tui.messages import EngineUpdated
from tui.model import Phase
from widgets.cells import TextLines
from widgets.gpus import GpuPanel


def screen_text(app: ControlConsoleApp) -> str:
    return "\n".join(line.text for line in app.screen._compositor.render_strips())


def spy(monkeypatch: pytest.MonkeyPatch, widget: Any) -> list[tuple[Region, ...]]:
    """The regions each refresh of `widget` asked for; () is the whole widget."""
    asked: list[tuple[Region, ...]] = []
    real = widget.refresh

    def refresh(*regions: Region, **kw: Any) -> Any:
        asked.append(regions)
        return real(*regions, **kw)

    monkeypatch.setattr(widget, "refresh", refresh)
    return asked


async def test_the_phase_clock_ticking_repaints_its_figures_only(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    now = cs.T0 + 103.0
    app.clock = lambda: now
    snap = cs.snapshot(Phase.LOADING)
    async with app.run_test(size=(100, 30)) as pilot:
        app.post_message(EngineUpdated(PhaseChanged(snap)))
        detail = app.query_one("#phase-detail", TextLines)
        assert await until(pilot, lambda: "loading" in detail.plain)
        await settled(pilot)
        asked = spy(monkeypatch, detail)
        before = detail.plain
        now += 1.0
        app.render_all()
        await settled(pilot)
        assert detail.plain != before  # the clock moved
        regions = [r for call in asked for r in call]
        assert asked and all(call for call in asked), asked  # never the whole widget
        assert all(r.height == 1 and r.width <= 4 for r in regions), regions  # "1m13" from "1m12": a figure's cells
        text = screen_text(app)
        detail.refresh()
        await settled(pilot)
        assert screen_text(app) == text


async def test_a_gpu_figure_moving_repaints_its_cells_in_its_row(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        first = cs.gpus(128.4, 68)
        app.post_message(EngineUpdated(GpusSampled(first, cs.history(128.4))))
        assert await until(pilot, lambda: app.gpu_snap is first)
        app.render_gpus()
        await settled(pilot)
        panel = app.query_one(GpuPanel)
        asked = spy(monkeypatch, panel)
        row3 = next(i for i, row in enumerate(panel.rows) if "3 " in "".join(t for t, _ in row)[:6])
        changed = dataclasses.replace(first, gpus=tuple(
            dataclasses.replace(g, util_pct=97.0) if g.index == 3 else g for g in first.gpus))
        app.post_message(EngineUpdated(GpusSampled(changed, cs.history(128.4))))
        assert await until(pilot, lambda: app.gpu_snap is changed)
        app.render_gpus()
        await settled(pilot)
        regions = [r for call in asked for r in call]
        assert asked and all(call for call in asked), asked
        assert [(r.y, r.width) for r in regions] == [(row3, 2)], regions  # "97" for "68", in GPU 3's row
        text = screen_text(app)
        assert " 97%" in text and text.count(" 68%") == 7
        panel.refresh()
        await settled(pilot)
        assert screen_text(app) == text
