"""A restart of a stopped deployment beside another deployment's running server on the same GPUs (issue 51): it
waited out its 10-minute release timeout for the other server's memory, never named the holder, then said "the
running server still has the old flags" of a deployment that ran nothing; the overview and `status --all` charged
the other's memory to the stopped one.

Now the other deployment's memory is named (its deployment, its pid) and not waited for: the start goes on at once
when what is left free is enough (its last ready run's memory), and is refused at once, with nothing changed, when
it is not. Two real `process` deployments of the simulated server on one simulated 8-GPU host, neither with `gpus`
set (both cover every GPU), sharing its simulated nvidia-smi state; real `bringup` processes.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.simdeploy import sim_host
from tests.helpers.wait import slack
from tui.config.deployments import ProcessDeployment
from tui.config.parts import HostConfig
from tui.config.settings import load
from tui.engine.gpu_owners import GpuOwners
from tui.lifecycle.release import Neighbours, OwnerKind
from tui.transport.local import LocalTransport

pytestmark = pytest.mark.slow

#: the release timeout of both deployments: a restart that waits for the other's memory ends only after it
RELEASE_TIMEOUT_S = 30.0
#: what "at once" allows on a loaded test machine (the wait it replaces was the whole timeout)
AT_ONCE_S = 8.0


def two_on_all_gpus(make_bringup: Callable[..., Bringup], *sim_args: str) -> tuple[Bringup, Bringup]:
    """sim-a and sim-b, each the simulated server on all 8 GPUs with `sim_args`, in one config (neither names its
    GPUs, as docs/configuration.md's two deployments on one host do not)."""
    a = make_bringup(name="sim-a", sim_args=sim_args)
    b = make_bringup(name="sim-b", sim_args=sim_args)
    assert a.config == b.config and a.sim_state == b.sim_state  # one tmp dir: one config, one simulated host
    deps = {bu.name: ProcessDeployment(host="simhost", manager="process", command=bu.sim_command(),
                                       endpoint=bu.endpoint, release_tolerance_mib=512, stop_timeout_s=20,
                                       release_timeout_s=RELEASE_TIMEOUT_S) for bu in (a, b)}
    ConfigFile(state_dir=a.state_dir, hosts={"simhost": sim_host(a.sim_state)}, deployments=deps).write(a.config)
    return a, b


def steps(out: str) -> list[dict[str, Any]]:
    return [d for line in out.splitlines() if line.startswith("{") and "step" in (d := json.loads(line))]


def server_pid(bu: Bringup) -> int:
    rec = bu.current()
    assert rec is not None and rec.get("pid"), rec
    return int(rec["pid"])


def a_ran_then_b_runs(a: Bringup, b: Bringup) -> None:
    """sim-a ready once (its memory on record, its GPU baseline taken on empty GPUs), stopped; then sim-b up on the
    same GPUs: sim-a's baseline predates sim-b's memory, the case that was waited out."""
    a.bring_up()
    a.ok("stop", a.name)
    b.bring_up()


def test_a_start_that_fits_goes_on_at_once_naming_the_other_deployment(make_bringup: Callable[..., Bringup]) -> None:
    # an 8B model (15 GiB of weights) at a 0.4 budget takes ~57 GiB of each 140 GiB GPU: two fit
    a, b = two_on_all_gpus(make_bringup, "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
                           "--mem-fraction-static", "0.4")
    a_ran_then_b_runs(a, b)
    pid_b = server_pid(b)


    r = a.run("restart", a.name, "--yes", "--json", timeout=RELEASE_TIMEOUT_S + 30)
    assert r.rc == 0, r.describe()
    got = steps(r.out)
    stop = next(s for s in got if s["step"] == "stop")
    release = [s for s in got if s["step"] == "release"]
    assert stop["status"] == "skipped" and release and release[-1]["status"] == "done", got
    assert release[-1]["at"] - stop["at"] < slack(AT_ONCE_S), got  # not the release timeout
    said = release[-1]["detail"]
    assert "not waited for" in said and "deployment sim-b" in said and str(pid_b) in said, said
    assert "enough for the start's" in said and "last ready run" in said, said
    assert a.status()["phase"] == "ready"


def test_a_start_that_cannot_fit_is_refused_at_once_with_nothing_changed(
        make_bringup: Callable[..., Bringup]) -> None:
    a, b = two_on_all_gpus(make_bringup)  # the default: ~127 GiB of each 140 GiB GPU, never two
    a_ran_then_b_runs(a, b)
    pid_b = server_pid(b)
    flags_before = a.argv_bytes()
    invocation = a.invocation()

    r = a.run("restart", a.name, "--yes", "--set", "mem-fraction-static=0.85", timeout=RELEASE_TIMEOUT_S + 30)
    assert r.rc == 2, r.describe()  # refused: nothing done
    assert r.seconds < slack(AT_ONCE_S + 4), r.describe()  # the bringup process, not the release timeout
    said = r.out + r.err
    assert "deployment sim-b" in said and str(pid_b) in said and "bringup stop sim-b" in said, said
    assert "needs" in said and "--mem-fraction-static 0.85" in said and "nothing changed" in said, said
    assert "running server" not in said, said  # sim-a ran nothing
    assert a.argv_bytes() == flags_before and a.invocation() == invocation  # the flags unwritten, nothing started

    # `status --all` (the overview's rows, as a script reads them): the stopped sim-a holds none of sim-b's memory;
    # what its GPUs hold is said as theirs, not its own
    every = b.run("status", "--all", "--json")
    rows = {d["deployment"]: d for d in every.json()["deployments"]}
    assert rows["sim-a"]["phase"] == "stopped" and rows["sim-b"]["phase"] == "ready", every.describe()
    assert rows["sim-a"]["deployment_mem_used_mib"] == 0, rows["sim-a"]
    assert rows["sim-a"]["deployment_util_pct"] is None, rows["sim-a"]
    assert rows["sim-a"]["gpus_mem_used_mib"] > 8 * 100 * 1024, rows["sim-a"]
    assert rows["sim-b"]["deployment_mem_used_mib"] > 8 * 100 * 1024, rows["sim-b"]
    text = b.run("status", "--all").out
    row_a = next(line for line in text.splitlines() if line.startswith("sim-a "))
    assert " 0.0 GiB " in row_a, text


@pytest.mark.skipif(os.geteuid() != 0, reason="starts a process as another user: needs root")
async def test_another_users_process_is_named_by_its_user_and_roots_is_not(tmp_path: Path) -> None:
    """A process on the GPUs of a stopped deployment that another user owns is theirs (named, not waited for);
    root's may be the deployment's own server, and is not told apart."""
    settings = load(str(ConfigFile(state_dir=tmp_path / "state", hosts={"here": HostConfig()}, deployments={
        "sim-a": ProcessDeployment(host="here", manager="process", command=["server"])}).write(tmp_path / "c.toml")))
    owners = GpuOwners(settings, "sim-a", settings.deployments["sim-a"], LocalTransport(), Neighbours)
    theirs = subprocess.Popen(["sleep", "60"], user=65534)
    mine = subprocess.Popen(["sleep", "60"])
    try:
        who = await owners.who({theirs.pid, mine.pid}, users=True)
        assert set(who) == {theirs.pid}, who
        assert who[theirs.pid].kind is OwnerKind.USER and str(who[theirs.pid]) in ("user nobody", "user uid 65534")
        assert await owners.who({theirs.pid}, users=False) == {}  # a run of its own ran: users are not told apart
    finally:
        for p in (theirs, mine):
            p.kill()
            p.wait()
