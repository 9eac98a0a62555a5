"""The throughput panel's figures as pure functions of the samples (widgets/throughput.py, tui/collectors/metrics.py):
points averaged down to what braille can draw, never joined across a restart, smoothed, ticked; the TTFT over a
window of requests; a log's samples every ten seconds one line. The panel drawing them: tests/console/
test_throughput_panel.py."""

from __future__ import annotations

import itertools

import pytest


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


def test_samples_from_a_log_every_ten_seconds_are_a_line_and_not_stale() -> None:
    """vLLM writes its throughput line every 10 s: those samples are one run, fresh until three intervals pass."""
    from widgets.throughput import chart_series, interval, stale_after

    pts = [(1000.0 + 10.02 * k, 300.0) for k in range(12)]
    assert interval(pts) == pytest.approx(10.02) and interval(pts[:1]) == 1.0
    assert stale_after(pts) == pytest.approx(30.06) and stale_after([(0.0, 1.0), (1.0, 1.0)]) == 10.0
    assert len(chart_series(pts, pts[-1][0], 300, 200)) == 1
