"""The record's "GPU memory at each step" (issue 51, finding 5): the stop row said 0.0 GiB, read after the stop,
though the run had just held its memory; and a row's columns did not add up to its used. Real `bringup` processes
against the simulated server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.e2e import Bringup

pytestmark = pytest.mark.slow


def test_the_stop_row_holds_what_the_stopped_run_held_and_every_row_adds_up(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()
    bu.bring_up("--set", "disable-cuda-graph")  # stops the first run: its memory at the stop is on record
    d = bu.ok("record", bu.name, "--out", "-", "--json").json()
    stop = next(s for s in d["gpu_steps"] if s["step"] == "stop")
    assert (stop["used_mib"] or 0) > 100 * 1024, d["gpu_steps"]  # the ready run held ~1 TiB on 8 simulated GPUs
    assert stop["this_run_mib"] == 0 and stop["previous_run_mib"] > 100 * 1024, stop  # the run stopped: the one before
    for s in d["gpu_steps"]:
        if s["unattributed_mib"] is not None:
            parts = s["this_run_mib"] + s["previous_run_mib"] + s["other_mib"] + s["unattributed_mib"]
            assert abs(parts - s["used_mib"]) < 1, s
    md = bu.ok("record", bu.name, "--out", "-").out
    assert "| used | run under way | run before it | others | not told apart |" in md, md
