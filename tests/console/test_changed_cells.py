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
from tests.helpers.console_app import region_text, screen_text
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.engine.updates import GpusSampled, PhaseChanged, ThroughputSampled
from tui.model import Phase
from widgets.cells import TextLines
from widgets.gpus import GpuPanel


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


async def test_gpu_rows_redrawn_one_by_one_show_the_new_numbers_and_keep_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU figure moving repaints its cells in its row, nothing else: what is on screen afterwards must be exactly
    what a full repaint would show (a row or a cell left out of the repaint would keep its old numbers)."""
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        first = cs.gpus(128.4, 68)
        app.post_message(EngineUpdated(GpusSampled(first, cs.history(128.4))))
        assert await until(pilot, lambda: app.shown.gpu_snap is first)
        app.render_gpus()
        assert await until(pilot, lambda: screen_text(app).count(" 68%") == 8)
        panel = app.query_one(GpuPanel)
        asked = spy(monkeypatch, panel)
        row3 = next(i for i, row in enumerate(panel.rows) if "3 " in "".join(t for t, _ in row)[:6])
        changed = dataclasses.replace(first, gpus=tuple(
            dataclasses.replace(g, util_pct=97.0) if g.index == 3 else g for g in first.gpus))
        app.post_message(EngineUpdated(GpusSampled(changed, cs.history(128.4))))
        assert await until(pilot, lambda: app.shown.gpu_snap is changed)
        app.render_gpus()
        assert await until(pilot, lambda: " 97%" in screen_text(app))
        regions = [r for call in asked for r in call]
        assert asked and all(call for call in asked), asked
        assert [(r.y, r.width) for r in regions] == [(row3, 2)], regions  # "97" for "68", in GPU 3's row
        text = screen_text(app)
        on_screen = next(ln for ln in text.splitlines() if "▸ 3 " in ln or " 3 █" in ln)
        assert " 97%" in on_screen and text.count(" 68%") == 7, text
        panel.refresh()  # a full repaint shows the same
        await settled(pilot)
        assert screen_text(app) == text


async def test_the_chart_redrawn_repaints_the_cells_its_line_moved_in(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Its axes and labels stay as they were; the line's new cells are repainted, and the screen is then what a
    full repaint of the chart shows."""
    from widgets.tps_chart import TpsChart

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    now = cs.T0 + 100.0
    app.clock = lambda: now
    sample, hist = cs.throughput()
    async with app.run_test(size=(120, 40)) as pilot:
        app.post_message(EngineUpdated(PhaseChanged(cs.snapshot(Phase.READY))))
        app.post_message(EngineUpdated(ThroughputSampled(sample, tuple(hist))))
        assert await until(pilot, lambda: app.shown.tp is sample)
        app.render_throughput(force_plot=True)
        assert await until(pilot, lambda: bool(app.query(TpsChart)))
        await settled(pilot)
        chart = app.query_one(TpsChart)
        before = screen_text(app)
        # half a minute later, the line higher: far enough for the chart's pace to redraw it. The console's clock
        # moves only once the samples are in: a tick drawing the old samples at the new time would say "no samples
        # since" on a row of its own, and the chart, a row shorter, rightly repaints whole (seen under load)
        more = [*hist, *((cs.T0 + 100 + k, 400.0) for k in range(1, 31))]
        later = dataclasses.replace(sample, at=now + 30.0, tokens_per_s=400.0)
        app.post_message(EngineUpdated(ThroughputSampled(later, tuple(more))))
        assert await until(pilot, lambda: app.shown.tp is later)
        await settled(pilot)
        asked = spy(monkeypatch, chart)
        now += 30.0
        app.render_throughput(force_plot=True)
        await settled(pilot)
        text = screen_text(app)
        assert text != before
        regions = [r for call in asked for r in call]
        assert asked and all(call for call in asked), asked  # never the whole chart
        assert len({r.y for r in regions}) < chart.size.height  # some rows (the frame, the x labels) untouched
        # the chart's cells only: the phase panel's clock, read at the new time, may tick between the two reads
        drawn = region_text(app, chart.region)
        chart.refresh()
        await settled(pilot)
        assert region_text(app, chart.region) == drawn
