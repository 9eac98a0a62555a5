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
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.config_toml import ConfigFile
from tests.ports import free_port
from tui.config import DeploymentConfig, HostConfig, NodeConfig, ProbeConfig, load
from tui.engine import Engine
from tui.model import Phase

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "testhost.sh"
#: the second host's state directory (.ci/run boots it next to the first)
SECOND = os.environ.get("BRINGUP_TESTHOST_B_DIR", str(ROOT / ".testhost-b"))
UNIT = "sim-node.service"
pytestmark = pytest.mark.slow


def _env(second: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESTHOST_")}
    if second:
        env["TESTHOST_DIR"] = SECOND
    return env


def th(second: bool, *args: str, check: bool = True, inp: str | None = None) -> str:
    res = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env=_env(second), input=inp)
    if check and res.returncode != 0:
        raise AssertionError(f"testhost {'B' if second else 'A'} {args}: {res.returncode} {res.stderr}")
    return res.stdout


def up(second: bool) -> bool:
    if not SCRIPT.exists():
        return False
    res = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True, cwd=ROOT, env=_env(second))
    return res.returncode == 0 and res.stdout.startswith("up")


if not (up(False) and up(True)):
    if os.environ.get("BRINGUP_TESTHOST") == "required":
        raise RuntimeError("BRINGUP_TESTHOST=required but the two test hosts are not up (.ci/run boots both)")
    pytest.skip("two test hosts are needed (bash .ci/testhost.sh up, and again with TESTHOST_DIR=.testhost-b "
                "TESTHOST_NAME=bringup-testhost-b and other ports)", allow_module_level=True)


def unit_text(rank: int, port: int, rdv: int, *extra: str) -> str:
    args = (f"--model-path moonshotai/Kimi-K2.6 --tp-size 8 --nnodes 2 --node-rank {rank} --dist-init-addr "
            f"127.0.0.1:{rdv} --host 127.0.0.1 --port {port} --enable-metrics --sim-load 2 --sim-gpus 8 "
            f"--sim-gpu-ids 0,1,2,3 --sim-state-dir /var/lib/bringup-sim --time-scale 0.1 {' '.join(extra)}")
    return (f"[Unit]\nDescription=SGLang node {rank} of 2 (simulated)\n[Service]\nType=simple\n"
            f"ExecStart=/usr/bin/python3 -u /opt/bringup-sim/server.py {args.strip()}\nRestart=no\n"
            "KillMode=control-group\nTimeoutStopSec=30\n")


def reset(second: bool) -> None:
    th(second, "exec", "sh", "-c", f"systemctl stop {UNIT}; rm -rf /etc/systemd/system/{UNIT}*; "
       f"systemctl daemon-reload; systemctl reset-failed {UNIT} 2>/dev/null; rm -rf /var/lib/bringup-sim/holders; "
       "rm -f /run/lock/bringup-*", check=False)


@pytest.fixture
def conf(tmp_path: Path) -> Iterator[Path]:
    port, rdv = free_port(), free_port()
    hosts = {}
    for second, name, rank, extra in ((False, "node-a", 0, ()), (True, "node-b", 1, ("--sim-release-delay", "40"))):
        reset(second)
        th(second, "exec", "sh", "-c", f"cat > /etc/systemd/system/{UNIT} && systemctl daemon-reload",
           inp=unit_text(rank, port, rdv, *extra))
        cfg = tmp_path / f"ssh-{name}"
        th(second, "ssh-config", str(cfg))
        hosts[name] = HostConfig(ssh="testhost", ssh_config=str(cfg))
    dep = DeploymentConfig(manager="systemd", unit=UNIT, endpoint=f"http://127.0.0.1:{port}",
                           release_tolerance_mib=512, release_timeout_s=120,
                           nodes=[NodeConfig(host="node-a", gpus=[0, 1, 2, 3]),
                                  NodeConfig(host="node-b", gpus=[0, 1, 2, 3])])
    path = ConfigFile(state_dir=tmp_path / "state", probe=ProbeConfig(interval_s=0.3), hosts=hosts,
                      deployments={"mn": dep}).write(tmp_path / "bringup.toml")
    yield path
    for second in (False, True):
        reset(second)


def bringup(cfg: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cfg.parent, stdin=subprocess.DEVNULL)


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


async def test_a_worker_host_killed_fails_the_deployment_at_once_naming_the_node(conf: Path) -> None:
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
    finally:
        await engine.close()
    s = await asyncio.to_thread(bringup, conf, "stop", "mn")
    assert s.returncode == 0, s.stdout + s.stderr
    assert th(False, "exec", "systemctl", "is-active", UNIT, check=False).strip() != "active"
