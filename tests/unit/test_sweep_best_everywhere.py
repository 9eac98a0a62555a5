"""One rule for a sweep's best (issue 28): summary.md, the end of `bringup sweep`, `bringup sweep report` and the
console's sweep view all ask `verdict` (tui/sweep/summary.py), so where summary.md says "no clear best: within
spread" none of the others names a best, and where the lead is clear they name the same configuration, by the same
figure (the mean tokens/s at the highest concurrency), never a single lucky cell's peak."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.sweep_records import CONFIGS, Sweep
from tui.cli.sweep import end_lines
from tui.sweep.board import board
from tui.sweep.charts import render_report
from tui.sweep.live import LiveSweep
from tui.sweep.results import cell_id, read_results
from tui.sweep.runner import SweepResult
from tui.sweep.summary import best_overall, summary_md
from widgets.sweep import head_text

TOP = cell_id(128, 64, 8, 1)
LOW = cell_id(128, 64, 1, 1)


def two_configs(d: Path, a: float, b: float, *, low_a: float = 50.0, running: bool = False) -> Sweep:
    """budget=8 at `a` and budget=16 at `b` tok/s at concurrency 8 (a spread of 9.3 % each, from their requests'
    TPOT); at concurrency 1, budget=8 at `low_a`, budget=16 at 40."""
    s = Sweep(d, CONFIGS[:2], [LOW, TOP])
    for name, low, top in ((CONFIGS[0], low_a, a), (CONFIGS[1], 40.0, b)):
        s.config(name, {"speculative-num-draft-tokens": name.split("=")[1]})
        s.cell(name, LOW, low)
        s.cell(name, TOP, top)
    if not running:
        s.meta("done")
    return s


def views(d: Path, at: float) -> tuple[str, str, str, str]:
    """What summary.md, the CLI's end, the report and the console's head say of the best."""
    res = read_results(d)
    v = best_overall(res)
    assert v is not None
    result = SweepResult("done", d, "done", v.best.config, valid_cells=len(res.valid_cells()), best_clear=v.clear)
    live = LiveSweep.from_results(res)
    head = head_text(board(live, at), live, at).plain
    return (summary_md(res).split("## Best overall\n\n", 1)[1].split("\n", 1)[0], "\n".join(end_lines(result, d)),
            render_report(res, 120, 40), head)


def test_within_spread_no_front_end_names_a_best(tmp_path: Path) -> None:
    """209.4 against 203.7 tok/s, 2.8 % apart, each figure's own spread 9.3 %: summary.md names no best; before the
    shared rule the report's "best:" line and the console's "best:" named budget=8 all the same."""
    s = two_configs(tmp_path, 209.4, 203.7)
    md, end, report, head = views(tmp_path, s.at)
    assert md.startswith("No clear best: within spread."), md
    assert "no clear best (within spread); highest mean budget=8" in end and "\nbest:" not in end, end
    assert ("no clear best (within spread): budget=8 209.4 vs budget=16 203.7 tok/s mean at concurrency 8; "
            "highest mean budget=8 (--speculative-num-draft-tokens 8)") in report, report
    assert "\nbest:" not in report
    assert "no clear best (within spread): budget=8 209.4 vs budget=16 203.7 tok/s mean at concurrency 8" in head
    assert "\nbest" not in head, head


def test_while_running_the_console_says_no_clear_best_so_far(tmp_path: Path) -> None:
    s = two_configs(tmp_path, 209.4, 203.7, running=True)
    live = LiveSweep.from_results(read_results(tmp_path))
    head = head_text(board(live, s.at), live, s.at).plain
    assert "no clear best (within spread) so far: budget=8 209.4 vs budget=16 203.7" in head, head
    assert "best so far:" not in head


def test_a_clear_lead_is_named_alike_everywhere(tmp_path: Path) -> None:
    s = two_configs(tmp_path, 243.0, 203.7)
    md, end, report, head = views(tmp_path, s.at)
    assert md.startswith("**budget=8**: 243.0 mean output tok/s at concurrency 8"), md
    assert f"best: budget=8 (summary: {tmp_path / 'summary.md'})" in end, end
    assert "best: budget=8, 243.0 tok/s mean at concurrency 8 (--speculative-num-draft-tokens 8)" in report, report
    assert "best: budget=8  243.0 tok/s mean at concurrency 8" in head, head
    assert "no clear best" not in report + head + end


def test_a_single_cells_peak_does_not_make_the_best(tmp_path: Path) -> None:
    """budget=8 has the highest cell of all (900 tok/s at concurrency 1, an outlier); budget=16 leads clearly at
    concurrency 8, where summary.md judges. The report and the console used to crown the peak."""
    s = two_configs(tmp_path, 150.0, 243.0, low_a=900.0)
    md, _, report, head = views(tmp_path, s.at)
    assert md.startswith("**budget=16**: 243.0 mean output tok/s at concurrency 8"), md
    assert "best: budget=16, 243.0 tok/s mean at concurrency 8" in report, report
    assert "best: budget=16  243.0 tok/s mean at concurrency 8" in head, head
