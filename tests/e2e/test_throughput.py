"""Throughput end to end on the simulated SGLang server: the console's numbers against the server's own,
accept length with speculative decoding, the no-metrics case, and `bringup bench`."""

from __future__ import annotations

import asyncio
import http.server
import itertools
import json
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait
from tests.helpers.e2e import Bringup, free_port, kill_processes, wait_no_sim_processes
from tests.helpers.pilot import settled, until
from tests.helpers.wait import until_async
from tui.config import load
from tui.engine import Engine

pytestmark = pytest.mark.slow


@pytest.fixture
def bu(tmp_path: Path) -> Iterator[Bringup]:
    b = Bringup(tmp_path, sim_args=("--sim-load", "4"))
    yield b
    b.run("stop", b.name, timeout=60)
    left = wait_no_sim_processes(str(tmp_path), timeout=5.0)
    if left:
        kill_processes(left)
        pytest.fail(f"processes left behind: {left}")


def sim_gauge(b: Bringup) -> float:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{b.endpoint}/metrics", timeout=2) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("sglang:gen_throughput"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError("the sim has no gen_throughput gauge")


async def test_console_tokens_per_second_agree_with_the_server(bu: Bringup) -> None:
    bu.bring_up()
    settings = load(str(bu.config))
    w = Engine(settings, bu.name, settings.deployments[bu.name])
    await w.start()
    ours: list[float] = []
    theirs: list[float] = []
    try:
        deadline = time.monotonic() + 60
        while len(ours) < 8:  # counted in samples, not in a window of wall-clock time
            assert time.monotonic() < deadline, ("too few metrics samples", ours)
            await asyncio.sleep(1.0)  # one side-by-side reading a second
            if w.throughput is not None and w.throughput.source == "metrics" and w.throughput.tokens_per_s:
                ours.append(w.throughput.tokens_per_s)
                theirs.append(await asyncio.to_thread(sim_gauge, bu))
    finally:
        await w.close()
    assert len(ours) >= 6, "too few metrics samples"
    mine, server = statistics.fmean(ours[2:]), statistics.fmean(theirs[2:])
    assert abs(mine - server) / server < 0.05, (ours, theirs)


def test_status_json_has_tokens_per_second_and_accept_length_with_speculation(bu: Bringup) -> None:
    bu.bring_up("--set", "speculative-algorithm=DFLASH", "--set", "speculative-dflash-block-size=8",
                "--set", "disable-cuda-graph")
    tp = wait.until("tokens/s and an acceptance length in the status", lambda: (t := bu.status()["throughput"])
                    and t["tokens_per_s"] and t["accept_len"] is not None and t)
    assert tp["tokens_per_s"] and tp["tokens_per_s"] > 0
    assert tp["accept_len"] is not None and tp["accept_len"] > 1.0


def test_without_metrics_the_log_lines_are_used_and_the_hint_is_given(bu: Bringup) -> None:
    bu.bring_up("--unset", "enable-metrics")
    # the first decode line comes about a second after ready (longer when busy)
    st = wait.until("tokens/s from the log",
                    lambda: x if ((x := bu.status())["throughput"] or {}).get("tokens_per_s") else None, 20)
    assert st["throughput"]["source"] == "log" and st["throughput"]["tokens_per_s"] > 0
    assert any("--enable-metrics" in n for n in st["notes"])


def bench(b: Bringup, *args: str) -> tuple[int, Any, str]:
    r = b.run("bench", b.name, "--json", *args, timeout=120)
    return r.rc, (json.loads(r.out) if r.rc == 0 else None), r.err


def test_bench_is_sensible(bu: Bringup) -> None:
    """Whether two runs agree within 30 % is a timing, measured by benchmarks/bench_reproducibility.py."""
    bu.bring_up("--set", "disable-cuda-graph")
    rc, out, err = bench(bu, "--concurrency", "1,4", "--max-tokens", "64", "--requests", "8")
    assert rc == 0, err
    levels = {lv["concurrency"]: lv for lv in out["levels"]}
    one, four = levels[1], levels[4]
    assert one["ok"] == one["requests"] and four["ok"] == four["requests"]
    assert four["aggregate_tps"] > 2 * one["aggregate_tps"]  # concurrency pays off
    assert 5 < one["stream_tps_mean"] < 1000 and 0 < one["ttft_p50_s"] < 5


def test_bench_endpoint_down_is_a_clear_error(bu: Bringup) -> None:
    rc, _, err = bench(bu)
    assert rc == 1 and "cannot connect" in err and "Traceback" not in err


@pytest.fixture
def not_openai(tmp_path: Path) -> Iterator[Callable[[], str]]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>not here</html>")

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield lambda: f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_bench_on_a_server_that_is_not_openai_compatible(tmp_path: Path, not_openai: Callable[[], str]) -> None:
    b = Bringup(tmp_path)
    b.config.write_text(f'[deployments.web]\nmanager = "none"\nendpoint = "{not_openai()}"\n')
    r = b.run("bench", "web", timeout=60)
    assert r.rc == 1 and "not an OpenAI-compatible" in r.err and "Traceback" not in r.err


def test_status_attributes_gpu_memory_to_the_run(bu: Bringup) -> None:
    bu.bring_up()
    a = bu.status()["attribution"]
    # the simulated server holds its memory from its own process: the process group of this run
    assert a["current_mib"] > 8 * 100_000 and a["previous_mib"] == 0 and a["other_mib"] == 0 and a["note"] is None


def test_chart_points_are_averaged_down_to_what_braille_can_draw() -> None:
    from widgets.throughput import downsample

    pts = [(1000.0 + i, 100.0 + (i % 7)) for i in range(300)]
    assert downsample(pts[:50], 112) == pts[:50]  # fewer than it can draw: as they are
    out = downsample(pts, 112)
    assert len(out) == 112
    assert out[-1][0] == pts[-1][0] and out[0][0] < out[-1][0]  # ends at the newest sample, in time order
    assert all(a[0] < b[0] for a, b in itertools.pairwise(out))
    assert all(100.0 <= v <= 106.0 for _, v in out)  # averages of the samples, nothing invented
    mean = sum(v for _, v in pts) / len(pts)
    assert abs(sum(v for _, v in out) / len(out) - mean) < 0.5


def test_the_chart_does_not_join_samples_across_a_restart() -> None:
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

    async def run() -> list[list[float]]:
        app = One()
        async with app.run_test(size=(80, 30)) as pilot:
            panel = app.query_one(ThroughputPanel)
            panel.show(None, before + after, now=after[-1][0])
            await settled(pilot)
            from textual_plotext import PlotextPlot

            fig = app.query_one(PlotextPlot).plt._active  # plotext's figure: one data set per plot call
            return [list(ys) for ys in fig.monitor.y]

    ys = asyncio.run(run())
    assert len(ys) == 2 and set(ys[0]) == {200.0} and set(ys[1]) == {50.0}, ys  # no point mixes the two runs


async def test_once_ready_and_serving_the_probe_slows_down_and_the_operator_can_ask(bu: Bringup) -> None:
    """The counters (/metrics under the simulated load) prove the run alive: no /health in the server's log, a
    generation every `ready_interval_s`; a probe asked for is sent at once."""
    from tui.engine import LogsRead, ProbeAnswered
    from tui.engine.cadence import Pace
    from tui.model import Phase

    bu.bring_up()
    settings = load(str(bu.config))
    settings = settings.model_copy(update={"probe": settings.probe.model_copy(update={"ready_interval_s": 3.0})})
    w = Engine(settings, bu.name, settings.deployments[bu.name])
    # the first sight of the unit wakes the probe for `wake_s` (30 s): shorter here, so the wait below is about
    # the counters' evidence, not a race against that window
    w.cadence.wake_s = 5.0
    probes: list[tuple[float, str]] = []
    access: list[str] = []
    w.subscribe(lambda u: probes.append((time.monotonic(), u.result.kind)) if isinstance(u, ProbeAnswered) else None)
    w.subscribe(lambda u: access.extend(ln.text for ln in u.lines if '"GET /health' in ln.text
                                        or "POST /v1/completions" in ln.text) if isinstance(u, LogsRead) else None)

    await w.start()
    try:
        await until_async(lambda: ("ready, probed slowly", probes), lambda: w.state.phase == Phase.READY
                          and w.cadence.pace(time.time(), w.state.phase) is Pace.SLOW, 30)
        slow_since, seen, n = time.monotonic(), len(access), len(probes)
        # the pace counted on the probes themselves, not in a wall-clock window: the next three generations
        await until_async(lambda: ("three generations at the slow pace", probes[n:]),
                          lambda: [k for _, k in probes[n:]].count("generate") >= 3, 30)
        gens = [t for t, k in probes[n:] if k == "generate"][:3]
        gaps = [b - a for a, b in itertools.pairwise(gens)]
        assert all(2.7 <= g < 6.0 for g in gaps), gaps  # one every 3 s
        window = [k for t, k in probes[n:] if slow_since + 0.5 <= t <= gens[-1]]  # one under way may still answer
        assert "health" not in window, window
        assert not any('"GET /health' in ln for ln in access[seen:]), access[seen:]
        asked_at = time.monotonic()
        w.probe_now()
        await until_async(lambda: ("the asked-for generation", probes),
                          lambda: any(t >= asked_at and k == "generate" for t, k in probes), 2.0)
        # one generation, and only that: the counters still prove it alive, no /health every 2 s after it
        assert w.cadence.pace(time.time(), w.state.phase) is Pace.SLOW
    finally:
        await w.close()


# ------------------------------------------------------------------------------------------------ the panel


def _ttft_page(ttft_sum: float, ttft_count: float, decode: float = 1000.0) -> str:
    return ("# TYPE sglang:realtime_tokens_total counter\n"
            f'sglang:realtime_tokens_total{{tp_rank="0",mode="decode"}} {decode}\n'
            "# TYPE sglang:time_to_first_token_seconds histogram\n"
            f"sglang:time_to_first_token_seconds_sum {ttft_sum}\n"
            f"sglang:time_to_first_token_seconds_count {ttft_count}\n")


def test_ttft_does_not_come_and_go_between_scrapes() -> None:
    """26 scrapes a second apart, a request starting every third second: the TTFT was there for 1 scrape in 3
    (None when no first token came in that second). Now it is the mean over a window of requests."""
    from tui.collectors.metrics import TTFT_WINDOW_S, MetricsRates

    r = MetricsRates()
    count, total, seen = 10, 1.0, []
    for k in range(26):
        if k % 3 == 0:
            count, total = count + 1, total + 0.09
        s = r.sample(_ttft_page(total, count, 1000.0 + 250 * k), 100.0 + k)
        assert s is not None
        seen.append(s.ttft_s)
    assert seen[:3] == [None, None, None]  # the first scrape is the base: no request since it yet
    assert all(v == pytest.approx(0.09) for v in seen[3:]), seen
    # no request in a whole window: no figure (the panel then shows the last one with its age)
    for k in range(26, 26 + int(TTFT_WINDOW_S) + 2):
        s = r.sample(_ttft_page(total, count, 1000.0 + 250 * k), 100.0 + k)
    assert s is not None and s.ttft_s is None
    # a restart (the counters start again) is no negative TTFT
    s = r.sample(_ttft_page(0.2, 1), 200.0)
    assert s is not None and s.ttft_s is None
    s = r.sample(_ttft_page(0.5, 2), 201.0)
    assert s is not None and s.ttft_s == pytest.approx(0.3)


def test_smoothing_ticks_and_the_x_axis() -> None:
    from widgets.throughput import SMOOTH_S, headline_value, nice_ticks, smooth, span_for, x_ticks

    pts = [(1000.0 + k, float(k % 2) * 100) for k in range(20)]  # 0, 100, 0, 100, ...
    sm = smooth(pts)
    assert all(40 <= v <= 60 for _, v in sm[int(SMOOTH_S):])  # a mean of the last 5 s
    assert headline_value(None, pts) == pytest.approx(sm[-1][1])
    assert smooth([(0.0, 10.0), (100.0, 50.0)]) == [(0.0, 10.0), (100.0, 50.0)]  # never across a gap
    assert nice_ticks(234, 6) == [0, 50, 100, 150, 200, 250]
    assert nice_ticks(234, 2) == [0, 250]
    assert nice_ticks(1635, 5) == [0, 500, 1000, 1500, 2000]
    assert span_for(20) == 30 and span_for(59) == 60 and span_for(1000) == 300
    assert x_ticks(120) == ([-120, -90, -60, -30, 0], ["-2m", "-90s", "-1m", "-30s", "now"])


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


def _figure(app: Any) -> Any:
    from textual_plotext import PlotextPlot

    return app.query_one(PlotextPlot).plt._active.monitor


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


def test_samples_from_a_log_every_ten_seconds_are_a_line_and_not_stale() -> None:
    """vLLM writes its throughput line every 10 s: those samples are one run, fresh until three intervals pass."""
    from widgets.throughput import chart_series, interval, stale_after

    pts = [(1000.0 + 10.02 * k, 300.0) for k in range(12)]
    assert interval(pts) == pytest.approx(10.02) and interval(pts[:1]) == 1.0
    assert stale_after(pts) == pytest.approx(30.06) and stale_after([(0.0, 1.0), (1.0, 1.0)]) == 10.0
    assert len(chart_series(pts, pts[-1][0], 300, 200)) == 1
