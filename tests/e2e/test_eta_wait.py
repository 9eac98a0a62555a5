"""`bringup wait` says no promise it cannot keep (issue 51, finding 4): on a run stalled in loading it first printed
the ETA as it stood when loading began (`[0.6s] loading ... ready in ~13s`), then `STALLED ... 116 s`; on a run
already ready it printed `no ETA: ... (this one will be the first on record)`. Real `bringup` processes against the
simulated server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.wait import until

pytestmark = pytest.mark.slow


def test_wait_on_a_stalled_run_prints_no_ready_time(make_bringup: Callable[..., Bringup]) -> None:
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

    until("status says STALLED", stalled, timeout=60, every=0.5)
    r = bu.run("wait", bu.name, "--timeout", "3", timeout=40)
    assert "loading" in r.out, r.describe()
    assert "ready in" not in r.out and "left" not in r.out, r.describe()


def test_wait_on_a_ready_run_says_nothing_of_an_eta(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    bu.bring_up()  # the first run on record, ready
    r = bu.run("wait", bu.name, "--timeout", "10", timeout=40)
    assert r.rc == 0, r.describe()
    assert "no ETA" not in r.out + r.err and "first on record" not in r.out + r.err, r.describe()
