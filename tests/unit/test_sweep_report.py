"""A sweep's report, charts and matrix (tui/sweep/charts.py, board.py) as pure functions of its records, written by
hand as the runner writes them (tests/helpers/sweep_files.py); and a records line taken only once it is whole. The
view that shows them as the records grow: tests/console/test_sweep_view.py."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.sweep_files import (
    CELLS,
    CONFIGS,
    EXCERPT,
    FAILED,
    HINT,
    RESTARTED,
    T0,
    append,
    append_raw,
    cell,
    config,
    full_sweep,
    live_of,
    meta,
    tok_s,
)
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
from tui.sweep.live import LineBuffer
from tui.sweep.results import read_results


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
