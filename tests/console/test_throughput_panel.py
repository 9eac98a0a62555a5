"""The throughput panel (widgets/throughput.py) drawn in an app of its own through Textual's Pilot: the headline is
the chart's last point, time moves on when samples stop, the chart is redrawn at the pace its span sets, the last
TTFT stays with its age, a short panel drops the chart, an empty one says so. What the chart was given is read from
the plot calls themselves (tests/helpers/plots.py), the figures above it from the screen's widgets."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.pilot import settled, until
from tests.helpers.plots import Drawing, drawn, record_plots


@pytest.fixture(autouse=True)
def plots_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    record_plots(monkeypatch)


def _figure(app: Any) -> Drawing:
    from textual_plotext import PlotextPlot

    return drawn(app.query_one(PlotextPlot))


async def test_the_chart_does_not_join_samples_across_a_restart() -> None:
    """A line across the downtime would draw throughput nobody had: samples more than GAP_S apart are plotted as
    separate runs, each averaged down on its own (a group never spans the gap)."""
    from textual.app import App, ComposeResult

    from widgets.throughput import GAP_S, ThroughputPanel, segments

    before = [(1000.0 + i, 200.0) for i in range(60)]
    after = [(1000.0 + 59 + GAP_S + 30 + i, 50.0) for i in range(60)]  # a restart: 40 s without a sample
    assert segments(before + after) == [before, after]
    assert segments(before) == [before]

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield ThroughputPanel(id="throughput")

    app = One()
    async with app.run_test(size=(80, 30)) as pilot:
        panel = app.query_one(ThroughputPanel)
        panel.show(None, before + after, now=after[-1][0])
        await settled(pilot)
        ys = [list(y) for y in _figure(app).y]  # one data set per plot call
    assert len(ys) == 2 and set(ys[0]) == {200.0} and set(ys[1]) == {50.0}, ys  # no point mixes the two runs


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _panel_app(height: int) -> Any:
    from textual.app import App, ComposeResult

    from widgets.throughput import ThroughputPanel

    class One(App[None]):
        CSS = f"ThroughputPanel {{ height: {height}; border: round white; padding: 0 1; }}"

        def compose(self) -> ComposeResult:
            yield ThroughputPanel(id="throughput")

    return One()


def _headline(app: Any) -> str:
    from widgets.cells import TextLines

    return str(app.query_one("#tps-now", TextLines).render())


async def test_the_headline_is_the_charts_last_point_and_the_y_axis_starts_at_zero() -> None:
    from tui.model import ThroughputSample
    from widgets.throughput import ThroughputPanel

    hist = [(1000.0 + k, 180.0 + 60 * ((k * 7) % 5) / 4) for k in range(90)]
    app = _panel_app(24)
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.query_one(ThroughputPanel)
        sample = ThroughputSample(at=hist[-1][0], tokens_per_s=hist[-1][1], source="metrics", running=4, queued=0)
        panel.show(sample, hist, now=hist[-1][0] + 0.5)
        await settled(pilot)
        mon = _figure(app)
        last = mon.y[-1][-1]
        assert f"{last:,.1f} tok/s" in _headline(app), (last, _headline(app))
        assert last != pytest.approx(hist[-1][1])  # a mean, not the last raw sample
        assert mon.ylim[0][0] == 0
        ticks = sorted(mon.yticks[0])
        assert ticks[0] == 0 and all(t % 50 == 0 for t in ticks), ticks
        # a sample between two chart frames changes neither: they stay in step until the chart is redrawn
        more = [*hist, (hist[-1][0] + 1, 900.0)]
        panel.show(sample, more, plot=False, now=more[-1][0])
        await until(pilot, lambda: f"{last:,.1f} tok/s" in _headline(app))
        assert f"{last:,.1f} tok/s" in _headline(app)
        panel.show(sample, more, plot=True, now=more[-1][0])
        await until(pilot, lambda: f"{_figure(app).y[-1][-1]:,.1f} tok/s" in _headline(app))
        assert f"{_figure(app).y[-1][-1]:,.1f} tok/s" in _headline(app)


async def test_time_keeps_moving_when_samples_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """22 s after the last sample the chart still ended at -0.6 s: now it ends 22 s before now, and says since
    when there are no samples."""
    from tui.model import ThroughputSample
    from widgets import throughput as w

    hist = [(1000.0 + k, 200.0) for k in range(40)]
    app = _panel_app(24)
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.query_one(w.ThroughputPanel)
        clock = _Clock(hist[-1][0] + 0.6)
        panel.clock = clock
        panel.show(ThroughputSample(at=hist[-1][0], tokens_per_s=200.0, source="metrics"), hist, now=clock())
        await until(pilot, lambda: _figure(app).x[-1][-1] == pytest.approx(-0.6))
        assert _figure(app).x[-1][-1] == pytest.approx(-0.6)
        clock.t += 21.4  # no sample since: only the console's tick redraws it (tests/console/test_app.py)
        monkeypatch.setattr(w, "STALE_REDRAW_S", 0.5)
        panel.age()
        await until(pilot, lambda: _figure(app).x[-1][-1] == pytest.approx(-22.0))
        assert _figure(app).x[-1][-1] == pytest.approx(-22.0)
        assert f"no samples since {w.clock_time(hist[-1][0])}" in _headline(app)


async def test_the_chart_is_redrawn_at_a_pace_its_span_sets() -> None:
    """Each redraw writes all the chart's rows to the terminal: a 5-minute chart is redrawn at most every 30 s (a tenth
    of its span), not at every one of the console's 5 s plots, while the figures above it follow each sample."""
    from tui.model import ThroughputSample
    from widgets import throughput as w

    hist = [(1000.0 + k, 200.0 + (k % 7) * 10) for k in range(200)]  # 200 s of samples: the 300 s span
    app = _panel_app(24)
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.query_one(w.ThroughputPanel)
        clock = _Clock(hist[-1][0])
        panel.clock = clock
        sample = ThroughputSample(at=hist[-1][0], tokens_per_s=200.0, source="metrics")

        def show(at: float) -> None:
            clock.t = at
            panel.show(sample, hist, plot=True, now=at)

        show(hist[-1][0])
        assert await until(pilot, lambda: _figure(app).x[-1][-1] == pytest.approx(0.0))
        for later in (5.0, 10.0, 29.0):
            show(hist[-1][0] + later)
            await settled(pilot)
            assert _figure(app).x[-1][-1] == pytest.approx(0.0), later  # the same chart: not redrawn
        show(hist[-1][0] + 300 / w.REDRAWS_PER_SPAN)
        assert await until(pilot, lambda: _figure(app).x[-1][-1] == pytest.approx(-30.0))


async def test_the_last_ttft_stays_with_its_age() -> None:
    from tui.model import ThroughputSample
    from widgets.throughput import ThroughputPanel

    app = _panel_app(24)
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.query_one(ThroughputPanel)
        clock = _Clock(1000.0)
        panel.clock = clock
        panel.show(ThroughputSample(at=1000.0, tokens_per_s=200.0, source="metrics", running=4, queued=0,
                                    ttft_s=0.09), [(1000.0, 200.0)], now=clock())
        await until(pilot, lambda: "TTFT 90 ms" in _headline(app) and "ago" not in _headline(app))
        assert "TTFT 90 ms" in _headline(app) and "ago" not in _headline(app)
        clock.t = 1001.0
        panel.show(ThroughputSample(at=1001.0, tokens_per_s=210.0, source="metrics", running=4, queued=0),
                   [(1000.0, 200.0), (1001.0, 210.0)], now=clock())
        await until(pilot, lambda: "TTFT 90 ms" in _headline(app))
        assert "TTFT 90 ms" in _headline(app)  # no first token in that second: still there
        clock.t = 1030.0
        panel.show(ThroughputSample(at=1030.0, tokens_per_s=210.0, source="metrics", running=4, queued=0),
                   [(1000.0, 200.0), (1001.0, 210.0), (1030.0, 205.0)], now=clock())
        await until(pilot, lambda: "TTFT 90 ms, 30 s ago" in _headline(app))
        assert "TTFT 90 ms, 30 s ago" in _headline(app)


@pytest.mark.parametrize("height", [4, 6, 9, 10, 14])
async def test_a_short_panel_shows_the_figures_without_a_squashed_chart(height: int) -> None:
    """At 80x24 the chart was two rows with its labels upside down: below CHART_MIN_ROWS rows for it, no chart."""
    from textual_plotext import PlotextPlot

    from tui.model import ThroughputSample
    from widgets.throughput import CHART_MIN_ROWS, ThroughputPanel

    hist = [(1000.0 + k, 200.0 + k) for k in range(60)]
    app = _panel_app(height)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(ThroughputPanel)
        panel.show(ThroughputSample(at=1059.0, tokens_per_s=259.0, source="metrics", running=4, queued=0), hist,
                   now=1059.5)
        await settled(pilot)
        plots = list(app.query(PlotextPlot))
        shown = [p for p in plots if p.display]
        text = _headline(app)
        assert "tok/s" in text and "running 4" in text
        if height - 2 - 2 < CHART_MIN_ROWS:  # the border's 2 rows, the figures' 2
            assert not shown, [p.size for p in shown]
        else:
            assert shown and shown[0].size.height >= CHART_MIN_ROWS


async def test_an_empty_panel_says_so_in_one_line() -> None:
    from widgets.throughput import ThroughputPanel

    app = _panel_app(10)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(ThroughputPanel)
        panel.show(None, [], now=1000.0)
        await until(pilot, lambda: not panel.has_data and panel.has_class("-no-data"))
        assert not panel.has_data and panel.has_class("-no-data")
        assert _headline(app) == "no throughput samples yet"
        panel.show(None, [], "no metrics: start the server with --enable-metrics", now=1000.0)
        await until(pilot, lambda: _headline(app) == "no metrics: start the server with --enable-metrics")
        assert _headline(app) == "no metrics: start the server with --enable-metrics"
        panel.show(None, [(999.0, 120.0)], now=1000.0)
        assert panel.has_data and not panel.has_class("-no-data")
