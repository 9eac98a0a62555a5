"""The sweep's words about its restarts (issue 51, item 7): the dry run's estimate assumed 300 s a restart while the
deployment's run history knew it takes seconds, and the baseline configuration (its flags those running) said
"flags unchanged" and restarted with no word on why. Real `bringup` processes against the simulated server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.e2e import Bringup

pytestmark = pytest.mark.slow


PLAN = """
name = "words"
[[configs]]
name = "base"
[matrix]
prompt_tokens = [16]
output_tokens = [4]
concurrency = [1]
requests = 1
warmup_requests = 1
"""


def test_the_estimate_takes_the_restart_time_the_history_knows(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()  # one run on record, ready in seconds at the simulator's time scale
    plan = bu.tmp / "plan.toml"
    plan.write_text(PLAN, encoding="utf-8")
    d = bu.ok("sweep", bu.name, str(plan), "--dry-run", "--json").json()
    assert "300 s" not in d["assumptions"] and "median start-to-ready of the last 1 ready run" in d["assumptions"], d
    assert d["estimate_s"] < 120, d
    text = bu.ok("sweep", bu.name, str(plan), "--dry-run").out
    assert "estimated time: ~" in text and "300 s" not in text, text


def test_the_baseline_says_why_it_restarts(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()
    plan = bu.tmp / "plan.toml"
    plan.write_text(PLAN, encoding="utf-8")
    r = bu.run("sweep", bu.name, str(plan), "--out", str(bu.tmp / "out"), "--yes", timeout=180)
    assert r.rc == 0, r.describe()
    line = next(x for x in r.out.splitlines() if "flags unchanged" in x)
    assert "restarted all the same" in line and "fresh start" in line, r.describe()
