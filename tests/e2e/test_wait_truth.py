"""`bringup wait` says what is true (issue 28, item 5), on real simulated servers.

- a wait on a deployment that was stopped reports that it is stopped, not the old run's phases (its `ready`
  included) replayed as if they were news;
- a wait for several reports each deployment's real state on its last line (the ready ones ready, not "waiting"),
  and prints the phase lines of all of them in the order of their times.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host
from tests.helpers.wait import slack
from tui.config.settings import ProbeConfig

pytestmark = pytest.mark.slow

STARTUP = ("starting", "loading", "graph-capture", "warmup")


@pytest.fixture
def bu(make_bringup: Callable[..., Bringup]) -> Bringup:
    return make_bringup()


def test_wait_on_a_stopped_deployment_reports_it_stopped_and_no_old_run(bu: Bringup) -> None:
    bu.bring_up()
    inv = bu.invocation()
    assert bu.run("stop", bu.name).rc == 0
    w = bu.run("wait", bu.name, "--timeout", "60")
    assert w.rc == 4, w.describe()
    # nothing of the run that ended before the wait began: no `ready` line as if it had just become ready
    assert w.out.strip() == "", w.describe()
    assert w.err.strip() == f"bringup: {bu.name} is stopped: start it with 'bringup start {bu.name}'", w.describe()
    j = bu.run("wait", bu.name, "--timeout", "60", "--json")
    assert j.rc == 4, j.describe()
    records = [json.loads(line) for line in j.out.splitlines()]
    assert records == [{"deployment": bu.name, "result": "stopped", "phase": "stopped", "invocation": inv}], \
        j.describe()


# ---------------------------------------------------------------------------- several


def bringup(cfg: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The command run to its end; `timeout` only bounds it, beyond the longest `--timeout` a test gives."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True, text=True,
                          timeout=slack(timeout), env=env, cwd=cfg.parent, stdin=subprocess.DEVNULL)


def four(tmp: Path) -> Path:
    """sim-a and sim-b (to be ready), sim-c (fails in warmup: DFLASH with CUDA graphs) and sim-d (hangs loading its
    weights, so it is still starting up while the waits run however slow the machine: a slow start of a fixed ~27 s
    reached ready before the second wait ended on a loaded 2-core machine), two simulated GPUs each of one box."""
    deps = {}
    for name, gpus, scale, extra in (("sim-a", [0, 1], 0.1, []), ("sim-b", [2, 3], 0.1, []),
                                     ("sim-c", [4, 5], 0.1, ["--scenario", "dflash-graph-crash"]),
                                     ("sim-d", [6, 7], 0.1, ["--scenario", "hang-loading"])):
        port = free_port()
        cmd = sim_command(port, tmp / "simgpu", time_scale=scale, sim_load=0)
        cmd[cmd.index("--tp-size") + 1] = "2"
        deps[name] = process_deployment([*cmd, "--sim-gpu-ids", ",".join(map(str, gpus)), *extra], port,
                                        stop_timeout_s=20).model_copy(update={"gpus": gpus})
    return ConfigFile(state_dir=tmp / "state", probe=ProbeConfig(interval_s=0.3), hosts={"simhost": sim_host(
        tmp / "simgpu")}, deployments=deps).write(tmp / "config.toml")


def clock_lines(out: str) -> list[tuple[str, str]]:
    """(time, deployment) of each phase line of a tagged wait: `[14:02:31] b: loading ...`."""
    found = []
    for line in out.splitlines():
        m = re.match(r"\[(\d\d:\d\d:\d\d)\] (sim-[a-d]): ", line)
        assert m, f"not a tagged phase line: {line!r}"
        found.append((m[1], m[2]))
    return found


@pytest.mark.xfail(strict=False, reason="known defect, open: under load `wait` for several deployments can "
                   "print a line read back from one's history after a later live line of another (1 of 3 CI runs "
                   "on a 2-core VM)")
def test_waiting_for_several_says_what_each_is_in_time_order(tmp_path: Path) -> None:
    cfg = four(tmp_path)
    names = ["sim-a", "sim-b", "sim-c", "sim-d"]
    try:
        for name in names[:3]:
            r = bringup(cfg, "start", name, "--no-wait")
            assert r.returncode == 0, r.stderr
        r = bringup(cfg, "wait", "sim-a", "sim-b", "--timeout", "60")
        assert r.returncode == 0, r.stdout + r.stderr
        assert bringup(cfg, "wait", "sim-c", "--timeout", "60").returncode == 1
        r = bringup(cfg, "start", "sim-d", "--no-wait")
        assert r.returncode == 0, r.stderr

        t0 = time.monotonic()
        w = bringup(cfg, "wait", *names, "--timeout", "120")
        took = time.monotonic() - t0
        assert w.returncode == 1, w.stdout + w.stderr
        # well before the 120 s it was given: the failure ended it, not the timeout
        assert took < slack(60), f"the failure ended the wait after {took:.0f} s\n{w.stdout}{w.stderr}"
        # the last line: how each one is, not "waiting" for those that are ready
        last = w.stderr.strip().splitlines()[-1]
        m = re.fullmatch(r"bringup: sim-c failed; the wait ended there \(sim-a ready, sim-b ready, sim-d (\S+)\)",
                         last)
        assert m and m[1] in STARTUP, w.stderr
        # every phase line in the order of its time, whatever order each deployment's log was read in
        lines = clock_lines(w.stdout)
        assert {d for _, d in lines} == set(names), w.stdout
        assert [t for t, _ in lines] == sorted(t for t, _ in lines), w.stdout

        j = bringup(cfg, "wait", *names, "--timeout", "120", "--json")
        assert j.returncode == 1, j.stdout + j.stderr
        records: list[dict[str, Any]] = [json.loads(line) for line in j.stdout.splitlines()]
        ats = [r["at"] for r in records if "phase" in r and "at" in r]
        assert ats and ats == sorted(ats), records
        end = records[-1]
        assert end["result"] == "failed" and end["ended_by"] == "sim-c", end
        assert end["deployments"] == {"sim-a": "ready", "sim-b": "ready", "sim-c": "failed", "sim-d": "waiting"}, end
        assert end["phases"]["sim-a"] == end["phases"]["sim-b"] == "ready", end
        assert end["phases"]["sim-c"] == "failed" and end["phases"]["sim-d"] in STARTUP, end
        # each deployment's result after its own phases
        for name in names[:3]:
            mine = [i for i, r in enumerate(records) if r.get("deployment") == name]
            result = [i for i in mine if "result" in records[i]]
            assert len(result) == 1 and result[0] == max(mine), records
    finally:
        for name in names:
            bringup(cfg, "stop", name)
