"""A deployment over several nodes: flags edited once and applied to each node, runs of the workers bound to the
head's, GPUs keyed by node, and end to end on two simulated nodes (real processes that rendezvous over TCP like
SGLang's `--nnodes 2`): bring-up to ready, a worker's crash failing the deployment with its node named while the
head only hangs, a restart across both nodes that waits for the slower node's release, and a node that cannot be
reached refusing a restart before anything is stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import PY, sim_host
from tests.helpers.wait import slack
from tui.config.deployments import ProcessDeployment
from tui.config.parts import HostConfig, NodeConfig
from tui.config.settings import ProbeConfig

# ------------------------------------------------------------------------------------------------- end to end

def bringup(cfg: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True, text=True,
                          timeout=slack(timeout), env=env, cwd=cfg.parent, stdin=subprocess.DEVNULL)


def node_command(rank: int, port: int, rdv: int, sim_state: Path, *extra: str) -> list[str]:
    """Node `rank` of a simulated SGLang deployment of TP 8 over two nodes of four simulated GPUs each."""
    return [PY, "-u", "-m", "tui.sim", "--port", str(port), "--tp-size", "8", "--nnodes", "2", "--node-rank",
            str(rank), "--dist-init-addr", f"127.0.0.1:{rdv}", "--sim-state-dir", str(sim_state), "--sim-gpus", "4",
            "--time-scale", "0.1", "--enable-metrics", "--sim-load", "2", *extra]


def two_nodes(tmp: Path, *, worker: tuple[str, ...] = (), head: tuple[str, ...] = (),
              worker_host: HostConfig | None = None) -> Path:
    """Nodes `node-a` (head) and `node-b` on this machine, each with four simulated GPUs of its own."""
    port, rdv = free_port(), free_port()
    hosts = {"node-a": sim_host(tmp / "gpu-a"), "node-b": worker_host or sim_host(tmp / "gpu-b")}
    for h in hosts.values():
        if "--sim-gpus" not in h.nvidia_smi:
            h.nvidia_smi += ["--sim-gpus", "4"]
    dep = ProcessDeployment(manager="process", endpoint=f"http://127.0.0.1:{port}", release_tolerance_mib=512,
                            stop_timeout_s=20, release_timeout_s=60, nodes=[
                                NodeConfig(host="node-a", gpus=[0, 1, 2, 3],
                                           command=node_command(0, port, rdv, tmp / "gpu-a", *head)),
                                NodeConfig(host="node-b", gpus=[0, 1, 2, 3],
                                           command=node_command(1, port, rdv, tmp / "gpu-b", *worker))])
    return ConfigFile(state_dir=tmp / "state", probe=ProbeConfig.model_validate({"interval_s": 0.3}), hosts=hosts,
                      deployments={"mn": dep}).write(tmp / "config.toml")


def node_record(tmp: Path, node: int, name: str) -> Any:
    return json.loads((tmp / "state" / "deployments" / "mn" / f"node-{node}" / name).read_text())


@pytest.mark.slow
def test_two_nodes_up_then_a_flag_change_across_both_waiting_for_the_slower_release(tmp_path: Path) -> None:
    # node-b's simulated GPUs hold their memory 4 s after its process exits: a start before that OOMs node-b
    cfg = two_nodes(tmp_path, worker=("--sim-release-delay", "40"))
    try:
        r = bringup(cfg, "start", "mn")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "node-a: starting (head)" in r.stdout and "node-b: start asked" in r.stdout
        st = json.loads(bringup(cfg, "status", "mn", "--json").stdout)
        assert st["phase"] == "ready" and st["host"] == "node-a,node-b"
        gpus = st["gpus"]["gpus"]
        assert [(g["host"], g["index"]) for g in gpus] == [(h, i) for h in ("node-a", "node-b") for i in range(4)]
        assert all(g["mem_used_mib"] > 100_000 for g in gpus), gpus  # both nodes' GPUs hold the model
        assert {p["host"] for p in st["gpus"]["processes"]} == {"node-a", "node-b"}
        a = st["attribution"]
        assert a["current_mib"] > 0 and a["other_mib"] == 0, a  # every process is this run's, on both hosts
        # the overview's table for scripts: the deployment's GPUs by host, and their memory summed over both nodes
        row = json.loads(bringup(cfg, "status", "--all", "--json").stdout)["deployments"][0]
        assert row["deployment_gpus"] == [f"{h}:{i}" for h in ("node-a", "node-b") for i in range(4)], row
        assert abs(row["deployment_mem_used_mib"] - sum(g["mem_used_mib"] for g in gpus)) < 8 * 2048, row

        r = bringup(cfg, "restart", "mn", "--set", "disable-cuda-graph", "--yes", timeout=180)
        assert r.returncode == 0, r.stdout + r.stderr
        out = r.stdout
        assert "node-a: stopped in" in out and "node-b: stopped in" in out
        assert out.index("node-a: flags written") < out.index("node-b: flags written") < out.index("node-a: stopped")
        assert "held on GPU node-b:" in out, out  # the wait named the slower node's GPUs ...
        released = out.index("GPU memory released after")
        assert released < out.index("node-a: starting (head)")  # ... and nothing started before both released
        for node, rank in ((0, "0"), (1, "1")):
            argv = node_record(tmp_path, node, "argv.json")
            assert "--disable-cuda-graph" in argv, argv  # the edit reached both nodes
            assert argv[argv.index("--node-rank") + 1] == rank  # each keeps its own rank
            assert argv[argv.index("--sim-state-dir") + 1].endswith("gpu-a" if node == 0 else "gpu-b")
        st = json.loads(bringup(cfg, "status", "mn", "--json").stdout)
        assert st["phase"] == "ready" and "disable-cuda-graph" in st["flags"], st
    finally:
        bringup(cfg, "stop", "mn")


@pytest.mark.slow
def test_a_worker_crash_fails_the_deployment_at_once_naming_the_node(tmp_path: Path) -> None:
    # the worker dies of an NCCL error 3 s after bring-up; the head would only say so at its watchdog (60 s here)
    cfg = two_nodes(tmp_path, worker=("--sim-crash-after", "30"), head=("--watchdog-timeout", "600"))
    try:
        r = bringup(cfg, "start", "mn")
        assert r.returncode == 0, r.stdout + r.stderr
        t0 = time.time()
        while True:  # ready now; the worker dies 3 s later
            st = json.loads(bringup(cfg, "status", "mn", "--json").stdout)
            if st["phase"] == "failed" or time.time() - t0 > 50:
                break
        assert st["phase"] == "failed", st
        assert time.time() - t0 < 40  # long before the head's watchdog (60 s) fires
        failure = st["failure"]
        assert failure["kind"] == "nccl", failure
        assert "⟦node-b⟧" in failure["excerpt"] and "NCCL error" in failure["excerpt"], failure
        head = node_record(tmp_path, 0, "current.json")
        assert head["pid"], head
        # the head still runs (hung): the stop stops it too
        s = bringup(cfg, "stop", "mn")
        assert s.returncode == 0, s.stdout + s.stderr
        st = json.loads(bringup(cfg, "status", "mn", "--json").stdout)
        assert st["phase"] == "failed" and st["failure"]["kind"] == "nccl", st  # the failure stays the story
        assert not Path(f"/proc/{head['pid']}").exists() or "zombie" in Path(f"/proc/{head['pid']}/status").read_text()
    finally:
        bringup(cfg, "stop", "mn")


@pytest.mark.slow
def test_a_node_that_cannot_be_reached_refuses_the_restart_before_anything_stops(tmp_path: Path) -> None:
    cfg = two_nodes(tmp_path)
    try:
        assert bringup(cfg, "start", "mn").returncode == 0
        before = node_record(tmp_path, 0, "current.json")["invocation"]
        worker_before = node_record(tmp_path, 1, "current.json")["invocation"]
        ssh_config = tmp_path / "ssh_config"
        ssh_config.write_text(f"Host nowhere\n    HostName 127.0.0.1\n    Port {free_port()}\n    User nobody\n")
        down = tmp_path / "down.toml"
        text = cfg.read_text().replace('[hosts.node-b]\n', f'[hosts.node-b]\nssh = "nowhere"\nssh_config = '
                                       f'"{ssh_config}"\n')
        down.write_text(text)
        r = bringup(down, "restart", "mn", "--set", "disable-cuda-graph", "--yes", timeout=90)
        assert r.returncode != 0, r.stdout + r.stderr
        # refused before anything is touched: by the GPU evidence check (node-b gives no reading) or the node check
        assert "node-b" in r.stdout + r.stderr and "refused" in r.stdout + r.stderr, r.stdout + r.stderr
        after = node_record(tmp_path, 0, "current.json")
        assert after["invocation"] == before and after.get("exit_status") is None, after  # the head runs on
        worker = node_record(tmp_path, 1, "current.json")
        assert worker["invocation"] == worker_before and worker.get("exit_status") is None, worker  # untouched
        for node in (0, 1):  # no flags written on either node (a node's argv file exists once flags were written)
            argv = tmp_path / "state" / "deployments" / "mn" / f"node-{node}" / "argv.json"
            assert not argv.exists() or "--disable-cuda-graph" not in json.loads(argv.read_text()), node
    finally:
        bringup(cfg, "stop", "mn")
