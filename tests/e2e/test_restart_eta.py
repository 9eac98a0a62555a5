"""`restart`'s follow lines say the ETA as `wait`'s phase lines do (issue 51, item 7: only `wait` and `status` said
it). Real `bringup restart` processes against the simulated server: the first run has none (said once, why), the
second goes by the first."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.helpers.e2e import Bringup

pytestmark = pytest.mark.slow


def _follow_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if "] follow " in ln]


def test_restart_follow_lines_carry_the_eta(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    first = bu.bring_up()
    said = [ln for ln in _follow_lines(first.out) if "no ETA: no past run" in ln]
    assert len(said) == 1, first.describe()  # why there is none, once
    second = bu.bring_up()
    with_eta = [ln for ln in _follow_lines(second.out) if "; last run " in ln and "left" in ln]
    assert with_eta, second.describe()
    third = bu.run("restart", bu.name, "--yes", "--json", timeout=40)
    assert third.rc == 0, third.describe()
    steps = [v for v in third.json_values() if isinstance(v, dict) and v.get("step") == "follow"]
    assert any(v.get("based_on") and v["based_on"]["runs"] >= 1 and v.get("eta_s") is not None for v in steps), \
        json.dumps(steps, indent=1)
