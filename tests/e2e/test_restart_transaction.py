"""A restart is one transaction under the deployment's lock, from its first step until ready, failed or its
timeout: a second restart during the first one's follow is refused, a run started by someone else outside the lock
is reported as superseded (never as this restart's ready or failure), and Ctrl-C says what it left behind and
releases the lock. Against the simulated server as a `process` deployment (the systemd side: test_remote_lock.py).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable

import pytest

from tests.helpers.e2e import Bringup
from tui.managers.process import ProcessManager
from tui.transport.local import LocalTransport

pytestmark = pytest.mark.slow


def test_a_second_restart_while_the_first_follows_its_new_run_is_refused_and_names_the_change(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(time_scale=0.4)  # loading takes some seconds: the follow step is a window to hit
    bu.bring_up(timeout=90)
    a = bu.popen("restart", bu.name, "--set", "disable-cuda-graph", "--yes", "--json", label="restart A")
    a.wait_for(r'"step": "follow"', timeout=60)
    b = bu.run("restart", bu.name, "--yes", timeout=60)
    assert b.rc == 2, b.describe()
    assert f"pid {a.pid}" in b.text and "disable-cuda-graph" in b.text, b.describe()
    ra = a.finish(120)
    assert ra.rc == 0, ra.describe()
    assert ra.json_values()[-1]["phase"] == "ready"
    assert "disable-cuda-graph" in bu.status()["flags"]


def test_a_run_started_outside_the_lock_is_reported_superseded_not_as_this_restarts_result(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(time_scale=0.4)
    bu.bring_up(timeout=90)
    a = bu.popen("restart", bu.name, "--set", "disable-cuda-graph", "--yes", label="restart A")
    a.wait_for(r"\[\.\.\.\] follow", timeout=60)
    ours = bu.invocation()

    async def by_hand() -> None:  # someone who does not use bringup: stop and start the server themselves
        mgr = ProcessManager(LocalTransport(), str(bu.run_dir), bu.sim_command(), {})
        await mgr.stop()
        await mgr.start(bu.sim_command())

    asyncio.run(by_hand())
    assert bu.invocation() != ours
    ra = a.finish(120)
    assert ra.rc == 5, ra.describe()
    assert "superseded by a start outside bringup's lock" in ra.text, ra.describe()
    assert f"{bu.name}: ready" not in ra.text and "FAILED" not in ra.text, ra.describe()


def test_ctrl_c_mid_restart_says_what_was_left_and_releases_the_lock(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(sim_args=("--sim-release-delay", "30"))  # the release wait is long: Ctrl-C lands in it
    bu.bring_up()
    a = bu.popen("restart", bu.name, "--set", "disable-cuda-graph", "--yes", label="restart A")
    a.wait_for("waiting for GPU memory", timeout=60)
    a.proc.send_signal(signal.SIGINT)
    ra = a.finish(30)
    assert ra.rc == 130, ra.describe()
    assert "Traceback" not in ra.text, ra.describe()
    line = [x for x in ra.err.splitlines() if "interrupted" in x]
    assert line == [f"bringup: {bu.name}: interrupted: flags written (+ --disable-cuda-graph), old run "
                    f"stopped, new run NOT started: `bringup start {bu.name}`"], ra.describe()
    assert (bu.run_dir / "restart.lock").read_bytes() == b""  # no record left for `wait` to trust
    t0 = time.monotonic()
    w = bu.run("wait", bu.name, "--timeout", "60", timeout=90)
    assert w.rc == 4 and time.monotonic() - t0 < 20, w.describe()
    assert json.loads((bu.run_dir / "argv.json").read_text())[-1] == "--disable-cuda-graph"


def test_status_polled_while_a_ready_server_stops_sees_only_ready_stopping_stopped(
        make_bringup: Callable[..., Bringup]) -> None:
    """A script polling `status` must never see a phase that did not happen (it read `warmup` for a second, and
    once `failed ... lost` for a clean stop)."""
    bu = make_bringup(scenario="stale-health")
    bu.bring_up()
    stop = bu.popen("stop", bu.name, label="stop")
    seen = []
    while stop.proc.poll() is None:
        r = bu.run("status", bu.name, "--json", timeout=30)
        seen.append(json.loads(r.out)["phase"])
    assert stop.finish(60).rc == 0
    seen.append(bu.status()["phase"])
    assert set(seen) <= {"ready", "stopping", "stopped"}, seen
    assert seen[-1] == "stopped"
