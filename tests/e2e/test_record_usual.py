"""The record's "usual" column compares like with like (issue 51, item 7): it mixed the past ready runs of other
flags in when none had the failed run's flags, under a header that did not say so. Now: the same flags, else the
runs one flag apart, that flag named, as the ETA does. Real `bringup` processes against the simulated server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.e2e import Bringup

pytestmark = pytest.mark.slow


def test_the_usual_column_is_of_runs_one_flag_apart_and_names_the_flag(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()  # ready with the config's flags
    bu.bring_up("--set", "mem-fraction-static=0.8")  # ready with one more
    # from there, one more flag that fails (3 does not divide 8): two flags from the first run, one from the second
    assert bu.run("restart", bu.name, "--set", "ep-size=3", "--yes", timeout=60).rc != 0
    r = bu.ok("record", bu.name, "--out", "-", "--json")
    d = r.json()
    assert d["outcome"] == "failed", r.describe()
    assert d["compared_with"] == {"runs": 1, "same_flags": False, "one_flag_apart": "--ep-size"}, d["compared_with"]
    md = bu.ok("record", bu.name, "--out", "-").out
    assert "usual (the past ready run that differs only in --ep-size)" in md, md
