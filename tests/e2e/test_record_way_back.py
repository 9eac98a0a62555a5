"""The record's way back runs (issue 51, item 3): the record of a failed demo run offered `bringup restart demo
--set disable-cuda-graph --unset scenario ...`, which `restart` refused ("unknown flag 'scenario'"). Real `bringup`
processes against the simulated server; every command a record offers is run, and must be accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.e2e import Bringup

pytestmark = pytest.mark.slow


def _record(bu: Bringup) -> dict[str, Any]:
    r = bu.ok("record", bu.name, "--out", "-", "--json")
    d = r.json()
    assert isinstance(d, dict) and d["outcome"] == "failed", r.describe()
    return d


def _run_offered(bu: Bringup, d: dict[str, Any]) -> list[str]:
    """Every command of the record's way back, run as it is (`--yes`: no terminal to ask on anyway)."""
    ran = []
    for line in d["go_back"]:
        if line.startswith("#"):
            continue
        words = line.split()
        assert words[:3] == ["bringup", "restart", bu.name], line
        r = bu.run(*words[1:], "--yes", timeout=60)
        assert r.rc == 0, r.describe()
        assert "unknown flag" not in r.text and 'kind = "bool"' not in r.text, r.describe()
        ran.append(line)
    return ran


def test_a_run_whose_command_line_changed_offers_no_command_restart_refuses(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()
    bu.ok("stop", bu.name)
    bu.scenario = "dflash-graph-crash"  # the config's command changed: an option no flag spec knows
    bu.write_config()
    assert bu.run("start", bu.name, timeout=60).rc != 0
    d = _record(bu)
    assert not any("--unset scenario" in c for c in d["go_back"]), d["go_back"]
    _run_offered(bu, d)
    assert d["go_back"] and d["go_back"][0].startswith("#"), d["go_back"]  # why there is none, said


def test_a_failed_flag_change_offers_the_restart_that_undoes_it_and_it_runs(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()
    assert bu.run("restart", bu.name, "--set", "ep-size=3", "--yes", timeout=60).rc != 0  # 3 does not divide 8
    d = _record(bu)
    assert _run_offered(bu, d) == [f"bringup restart {bu.name} --unset ep-size"], d["go_back"]
