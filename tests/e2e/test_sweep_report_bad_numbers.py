"""`bringup sweep report DIR` on a results directory with a number that is none in it (issue 47 review, finding 7):
a records.jsonl line with `completed: Infinity` made `int(inf)` raise OverflowError, uncaught, so the report of
every other cell was lost. Now the line is skipped, the report drawn, and the skip said on stderr."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.e2e import Bringup
from tests.helpers.sweep_records import BAD_CELLS, cell, write_results


def test_sweep_report_reads_past_a_planted_infinity_and_says_so(tmp_path: Path) -> None:
    out = write_results(tmp_path / "out", [cell({}, cell="p128-o64-c2-r0", concurrency=2), BAD_CELLS[0]])
    r = Bringup(tmp_path).run("sweep", "report", str(out))
    assert r.rc == 0, r.err
    assert "Traceback" not in r.err and "OverflowError" not in r.err
    assert "records.jsonl line 2 (cell) skipped: completed: inf is not a whole number" in r.err, r.err
