"""A refused command line's failure leads with the line that matters (issue 51, item 7: a bad-args excerpt printed 40
lines of argparse usage before `PROG: error: unrecognized arguments: ...`). The simulated server's real argparse
output for an unknown flag, read back by a real `bringup replay`: the usage folded to one line, the error kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.wait import slack
from tui.lifecycle.usage_fold import fold_usage

ROOT = Path(__file__).resolve().parents[2]


def _refusal(tmp_path: Path) -> Path:
    env = {**os.environ, "COLUMNS": "80"}
    r = subprocess.run([sys.executable, "-m", "tui.sim", "--no-such-flag"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=slack(30))
    assert r.returncode == 2 and r.stderr.count("\n") > 20, r.stderr  # the premise: a long usage
    log = tmp_path / "refused.log"
    log.write_text(r.stderr, encoding="utf-8")
    return log


def test_the_excerpt_folds_argparse_usage(tmp_path: Path) -> None:
    log = _refusal(tmp_path)
    r = subprocess.run([sys.executable, "-m", "tui", "replay", str(log), "--preset", "sglang"], cwd=ROOT,
                       capture_output=True, text=True, timeout=slack(60))
    excerpt = [ln for ln in r.stdout.splitlines() if ln.startswith("  | ")]
    assert len(excerpt) <= 3, r.stdout
    assert excerpt[-1].endswith("error: unrecognized arguments: --no-such-flag"), r.stdout
    assert "lines of usage left out" in excerpt[0], r.stdout


def test_a_whole_usage_keeps_its_first_line_and_nothing_else_is_folded() -> None:
    usage = ["usage: prog [-h] [--a A]", "            [--b B]", "            [--c C]", "prog: error: bad"]
    assert fold_usage(usage) == ["usage: prog [-h] [--a A] ... (2 more lines of usage left out)", "prog: error: bad"]
    traceback = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "    main()",
                 "ValueError: no"]
    assert fold_usage(traceback) == traceback
