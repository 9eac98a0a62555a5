"""Once stalled, no ready-time (issue 51, item 2): with the load hung, `status` said "ready in ~1m07s" on one line
and "STALLED: no progress for 84s" on the next, a countdown that grew by a second every second. Real `bringup`
processes against the simulated server: a first run reaches ready (the history an ETA stands on), the second hangs
in loading."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.wait import until

pytestmark = pytest.mark.slow


def test_a_stalled_start_promises_no_ready_time(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()  # the past run an ETA is read from
    bu.ok("stop", bu.name)
    bu.scenario = "hang-loading"
    bu.write_config()
    with bu.config.open("a", encoding="utf-8") as f:
        f.write("\n[probe]\nstall_after_s = 2\n")
    bu.ok("start", bu.name, "--no-wait")

    def stalled() -> dict[str, Any] | None:
        d = bu.status()
        return d if d.get("stalled_for") else None

    d = until("status says STALLED", stalled, timeout=60, every=0.5)
    assert d["eta_s"] is None and d["phase_eta_s"] is None, d
    assert re.match(r"no ETA: stalled since \d\d:\d\d:\d\d", d["eta"] or ""), d["eta"]
    r = bu.run("status", bu.name)
    assert "STALLED" in r.out and "ready in" not in r.out and "left" not in r.out, r.describe()
    assert "no ETA: stalled since" in r.out, r.describe()


def test_the_record_of_a_hang_says_the_hang_and_the_memory_it_holds(make_bringup: Callable[..., Bringup]) -> None:
    """Issue 51, item 4: the record of a hung run said "outcome: under-way", no stall, no last line, and its GPU
    table ended at loading's start (0.0 GiB) while the run held its memory."""
    bu = make_bringup(scenario="hang-loading")
    with bu.config.open("a", encoding="utf-8") as f:
        f.write("\n[probe]\nstall_after_s = 2\n")
    r = bu.run("start", bu.name, "--timeout", "8", timeout=60)  # watched until it gives up: stalled on record
    assert r.rc == 3, r.describe()
    d = bu.ok("record", bu.name, "--out", "-", "--json").json()
    assert d["outcome"] == "stalled", d["outcome"]
    assert d["stalled_since"] and d["last_line"], d
    last = d["gpu_steps"][-1]
    assert last["step"] == "stalled" and (last["used_mib"] or 0) > 0, d["gpu_steps"]
    md = bu.ok("record", bu.name, "--out", "-").out
    assert "## Stalled" in md and "outcome**: stalled" in md, md
