"""A deployment over two real systemd hosts (two test host containers, each with its own sshd, journald and
simulated GPUs; `.ci/testhost.sh` with TESTHOST_DIR for the second): one systemd unit per node running the
simulated server as SGLang's `--nnodes 2 --node-rank N`, reached over SSH like any remote host.

Proven here: bring-up to ready from both journals; a worker node killed (no fatal line: SIGKILL) fails the
deployment within a second or two of the kill with the node named, while the head only hangs; a restart with a
flag change across both nodes, drop-ins on both with each node's rank kept, that waits for the slower node's GPU
memory release before anything starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.helpers.multinode_hosts import UNIT, hosts_up, node_config, reset, th
from tests.helpers.wait import slack
from tui.config.settings import load
from tui.engine import Engine
from tui.model import Phase

pytestmark = pytest.mark.slow

if not hosts_up():
    if os.environ.get("BRINGUP_TESTHOST") == "required":
        raise RuntimeError("BRINGUP_TESTHOST=required but the two test hosts are not up (.ci/run boots both)")
    pytest.skip("two test hosts are needed (bash .ci/testhost.sh up, and again with TESTHOST_DIR=.testhost-b "
                "TESTHOST_NAME=bringup-testhost-b and other ports)", allow_module_level=True)


@pytest.fixture
def conf(tmp_path: Path) -> Iterator[Path]:
    yield node_config(tmp_path, worker=("--sim-release-delay", "40"))
    for second in (False, True):
        reset(second)


def bringup(cfg: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True,
                          text=True, timeout=slack(timeout), env=env, cwd=cfg.parent, stdin=subprocess.DEVNULL)


def test_two_hosts_up_then_a_restart_across_both_waits_for_the_slower_release(conf: Path) -> None:
    r = bringup(conf, "start", "mn")
    assert r.returncode == 0, r.stdout + r.stderr
    st = json.loads(bringup(conf, "status", "mn", "--json").stdout)
    assert st["phase"] == "ready" and st["host"] == "node-a,node-b", st
    mine = [g for g in st["gpus"]["gpus"] if g["index"] < 4]
    assert {g["host"] for g in mine} == {"node-a", "node-b"} and all(g["mem_used_mib"] > 100_000 for g in mine)
    assert st["attribution"]["other_mib"] == 0, st["attribution"]

    r = bringup(conf, "restart", "mn", "--set", "disable-cuda-graph", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "node-a: stopped in" in out and "node-b: stopped in" in out, out
    assert "held on GPU node-b:" in out, out  # node-b's memory outlives its process by 4 s: waited for, named
    assert out.index("GPU memory released after") < out.index("node-a: starting (head)")
    for second, rank in ((False, "0"), (True, "1")):
        cat = th(second, "exec", "systemctl", "cat", UNIT)
        exec_start = [ln for ln in cat.splitlines() if ln.startswith("ExecStart=") and len(ln) > 10][-1]
        assert "--disable-cuda-graph" in exec_start, cat  # the drop-in on both hosts
        assert re.search(rf"--node-rank {rank}\b", exec_start), exec_start  # each node keeps its rank
    st = json.loads(bringup(conf, "status", "mn", "--json").stdout)
    assert st["phase"] == "ready" and "disable-cuda-graph" in st["flags"], st


@contextlib.asynccontextmanager
async def ready_engine(conf: Path) -> AsyncIterator[Engine]:
    """`bringup start mn` over both hosts, then an engine watching it, once it has seen it ready."""
    r = await asyncio.to_thread(bringup, conf, "start", "mn")
    assert r.returncode == 0, r.stdout + r.stderr
    settings = load(str(conf))
    engine = Engine(settings, "mn", settings.deployments["mn"])
    await engine.start()
    try:
        t0 = time.monotonic()
        while engine.state.phase != Phase.READY and time.monotonic() - t0 < 60:
            await engine.wait_changed(0.5)
        assert engine.state.phase == Phase.READY, engine.state.phase
        yield engine
    finally:
        await engine.close()


async def test_a_worker_host_killed_fails_the_deployment_at_once_naming_the_node(conf: Path) -> None:
    async with ready_engine(conf) as engine:
        killed = time.monotonic()
        await asyncio.to_thread(th, True, "exec", "systemctl", "kill", "-s", "KILL", UNIT)
        while engine.state.phase != Phase.FAILED and time.monotonic() - killed < 30:
            await engine.wait_changed(0.2)
        took = time.monotonic() - killed
        assert engine.state.phase == Phase.FAILED, engine.state.phase
        assert took < 5.0, took  # the head says nothing until its watchdog (300 s x 0.1 here)
        failure = engine.state.failure
        assert failure is not None and "killed by signal 9, SIGKILL on node node-b" in failure.excerpt[-1], failure
        head = th(False, "exec", "systemctl", "is-active", UNIT, check=False).strip()
        assert head == "active", head  # the head hangs on: only node-b's unit told
    s = await asyncio.to_thread(bringup, conf, "stop", "mn")
    assert s.returncode == 0, s.stdout + s.stderr
    assert th(False, "exec", "systemctl", "is-active", UNIT, check=False).strip() != "active"


async def test_a_worker_host_that_stops_answering_leaves_the_head_seen_and_stoppable(conf: Path) -> None:
    """node-b's sshd gone (sessions killed, the service stopped): the deployment is not blind (the head's run is
    read, and the state names the silent node), and `bringup stop` still stops the head and frees its GPUs, naming
    the node it could not reach."""
    try:
        async with ready_engine(conf) as engine:
            await asyncio.to_thread(th, True, "exec", "sh", "-c",
                                    "systemctl stop ssh.socket ssh.service 2>/dev/null; pkill -KILL -f '^sshd: '; true")
            t0 = time.monotonic()
            while time.monotonic() - t0 < 30:
                u = engine.state.unit
                if u is not None and "node node-b not answering" in u.sub:
                    break
                await engine.wait_changed(0.5)
            u = engine.state.unit
            assert u is not None and "node node-b not answering" in u.sub, u
            assert engine.state.phase == Phase.READY and u.running, (engine.state.phase, u)  # the head's run, as read
            s = await asyncio.to_thread(bringup, conf, "stop", "mn")
            said = s.stdout + s.stderr
            assert s.returncode != 0 and "stopped on node-a; node node-b" in said, said
            head = th(False, "exec", "systemctl", "is-active", UNIT, check=False).strip()
            assert head != "active", (head, s.stdout + s.stderr)  # the head was stopped all the same
    finally:
        th(True, "exec", "systemctl", "start", "ssh.service", check=False)
