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
from types import SimpleNamespace
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import PY, sim_host
from tui.config import ConfigError, HostConfig, NodeConfig, ProbeConfig, ProcessDeployment, load, parse_deployment
from tui.engine.node_gpus import merge
from tui.lifecycle.lines import clean, node_tag
from tui.lifecycle.nodes import describe_gpus, gpu_key, node_argv, pid_key
from tui.lifecycle.release import release_status
from tui.managers.multinode import MultiNodeManager, Node
from tui.model import GpuProcess, GpuSample, GpuSnapshot, UnitState

# ------------------------------------------------------------------------------------------------- pure parts


def test_an_edit_of_the_heads_flags_is_applied_to_each_node_keeping_what_is_its_own() -> None:
    head = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "16", "--nnodes", "2",
            "--node-rank", "0", "--dist-init-addr", "10.0.0.1:5000", "--enable-metrics"]
    worker = ["/opt/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/data/m", "--tp", "16",
              "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:5000", "--enable-metrics"]
    edited = [w for w in head if w != "--enable-metrics"] + ["--disable-cuda-graph", "--tp", "8"]
    edited.remove("16")
    edited.remove("--tp")
    out = node_argv(head, edited, worker, ["node-rank"])
    assert out[:3] == worker[:3]  # the node's own program
    assert "--enable-metrics" not in out and "--disable-cuda-graph" in out
    assert out[out.index("--tp") + 1] == "8" and out.count("--tp") == 1
    assert out[out.index("--node-rank") + 1] == "1"  # node-specific: never the head's
    assert out[out.index("--model-path") + 1] == "/data/m"  # not edited: the node's own path stays
    # editing a node-specific flag on the head leaves the workers' alone; no edit changes nothing
    moved = list(head)
    moved[moved.index("--node-rank") + 1] = "5"
    assert node_argv(head, moved, worker, ["node-rank"]) == worker
    assert node_argv(head, head, worker, ["node-rank"]) == worker


def test_vllm_headless_workers_keep_their_own_switches() -> None:
    head = ["vllm", "serve", "m", "--data-parallel-size", "4", "--data-parallel-address", "h", "--max-num-seqs", "64"]
    worker = ["vllm", "serve", "m", "--headless", "--data-parallel-size", "4", "--data-parallel-start-rank", "2",
              "--data-parallel-address", "h", "--max-num-seqs", "64"]
    edited = [*head[:-1], "128"]
    out = node_argv(head, edited, worker, ["headless", "data-parallel-start-rank"])
    assert "--headless" in out and out[out.index("--data-parallel-start-rank") + 1] == "2"
    assert out[out.index("--max-num-seqs") + 1] == "128"


def test_node_tags_stay_in_the_excerpt_and_out_of_matching() -> None:
    c = clean(node_tag("gpu-b") + "[2026-01-02 10:00:00 TP9] Scheduler hit an exception: boom")
    assert c.prefixed and c.text == "Scheduler hit an exception: boom" and c.ranks == "TP9"
    assert c.body.startswith("⟦gpu-b⟧ [2026-01-02")
    assert clean('{"json": 1} line').text == '{"json": 1} line'  # a line that only looks like a tag


def _st(inv: str, active: str = "active", started: float = 1.0, status: int | None = None) -> UnitState:
    return UnitState(active=active, invocation=inv, started_at=started, exit_status=status, main_pid=10)


def test_a_workers_run_is_bound_to_the_heads_and_its_exit_fails_the_deployment() -> None:
    # combine() is pure but for the bindings it keeps: no node manager is asked anything
    nobody = SimpleNamespace(kind="process", target="process python3")
    m = MultiNodeManager([Node("a", nobody), Node("b", nobody)], ())  # type: ignore[arg-type]
    # first sight: what runs now belongs together
    u = m.combine([_st("h1"), _st("w1", started=2.0)])
    assert (u.active, u.invocation, u.started_at) == ("active", "h1", 2.0)
    # the head restarted, the worker not yet: its old run is no part of the new one
    u = m.combine([_st("h2", started=5.0), _st("w1")])
    assert u.active == "activating" and "waiting for b" in u.sub and u.invocation == "h2"
    u = m.combine([_st("h2", started=5.0), _st("w2", started=6.0)])
    assert u.active == "active" and u.started_at == 6.0
    # the worker exits while the head runs on (it hangs in its next collective): failed at once, naming it
    u = m.combine([_st("h2", started=5.0), _st("w2", "failed", 6.0, status=9)])
    assert u.active == "failed" and u.lingering and u.sub == "node b exited (status 9)" and u.ended_on == "b"
    # a worker restarted by itself is no part of the head's run either
    u = m.combine([_st("h2", started=5.0), _st("w3", started=9.0)])
    assert u.active == "failed" and "restarted by itself" in u.sub
    # the head gone and a worker still up: ended, but a stop still has something to stop
    u = m.combine([_st("h2", "inactive", 5.0), _st("w3", started=9.0)])
    assert not u.running and u.lingering and "still running on b" in u.sub
    # workers started before the head (vLLM's headless workers, Ray): bound all the same
    u = m.combine([_st("h3", started=20.0), _st("w4", started=19.0)])
    assert u.active == "active" and u.invocation == "h3"


def _gpus(n: int, used: float, pid: int) -> GpuSnapshot:
    return GpuSnapshot(at=time.time(), gpus=tuple(GpuSample(i, mem_used_mib=used, mem_total_mib=1000.0)
                                                  for i in range(n)),
                       processes=tuple(GpuProcess(pid, "python3", used, gpu_index=i) for i in range(n) if used))


def test_merged_gpus_are_keyed_by_node_and_a_missing_node_is_no_proof_of_release() -> None:
    snap = merge(("gpu-a", "gpu-b"), [_gpus(2, 0.0, 0), _gpus(2, 900.0, 77)])
    assert [g.index for g in snap.gpus] == [0, 1, 1000, 1001] and {g.host for g in snap.gpus} == {"gpu-a", "gpu-b"}
    assert {p.pid for p in snap.processes} == {pid_key(1, 77)} and not snap.error
    st = release_status(snap, [0, 1, gpu_key(1, 0), gpu_key(1, 1)], {pid_key(1, 77)}, {}, 100.0)
    assert not st.released and st.describe() == "1.8 GiB held on GPU gpu-b:0,1 by PID gpu-b:77"
    missing = merge(("gpu-a", "gpu-b"), [_gpus(2, 0.0, 0), None])
    assert "gpu-b: no GPU reading yet" in missing.error  # the release wait waits on an error, never on absence
    assert describe_gpus([0, 1, 2]) == "0-2"  # one node: as it always was


def test_config_of_nodes(tmp_path: Path) -> None:
    dep = parse_deployment({"manager": "systemd", "unit": "sglang.service", "nodes": [
        {"host": "a", "gpus": [0, 1]}, {"host": "b", "gpus": "all"}]})
    assert dep.host == "a" and dep.multinode and dep.nodes[1].gpus == [] and dep.host_label == "a,b"
    for bad, words in (
            ({"manager": "process", "nodes": [{"host": "a"}, {"host": "b"}]}, "own command"),
            ({"manager": "systemd", "unit": "u", "gpus": [0], "nodes": [{"host": "a"}, {"host": "b"}]}, "each node"),
            ({"manager": "none", "nodes": [{"host": "a"}, {"host": "b"}]}, "systemd' or 'process"),
            ({"manager": "systemd", "unit": "u", "host": "b", "nodes": [{"host": "a"}, {"host": "b"}]}, "head")):
        with pytest.raises(ValueError, match=words):
            parse_deployment(bad)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[deployments.x]\nmanager = "systemd"\nunit = "u"\nnodes = [{ host = "local" }, '
                   '{ host = "gpu-z" }]\n')
    with pytest.raises(ConfigError, match=r"deployments\.x\.nodes\[1\]\.host: unknown host 'gpu-z'"):
        load(str(cfg))


# ------------------------------------------------------------------------------------------------- end to end

def bringup(cfg: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cfg.parent, stdin=subprocess.DEVNULL)


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


def test_the_gpu_panel_groups_the_nodes_gpus_by_host() -> None:
    from widgets.gpus import _S, rows_for

    snap = merge(("gpu-a", "gpu-b"), [_gpus(2, 0.0, 0), _gpus(2, 900.0, 77)])
    rows = rows_for(snap, {}, [0, 1, gpu_key(1, 0), gpu_key(1, 1)], 0, False, 80)
    texts = ["".join(t for t, _ in r) for r in rows]
    a, b = texts.index("  gpu-a"), texts.index("  gpu-b")
    assert a < b and texts[a + 1].startswith("● 0 ") and texts[b + 1].startswith("● 0 "), texts
    assert not any("1000" in t for t in texts)  # keys never shown
    assert all(style in _S for r in rows for _, style in r if style)  # every style is one the panel can draw


def test_a_generation_counts_only_once_every_nodes_run_has_started() -> None:
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.reducer import initial, reduce
    from tui.model import LogLine, Phase, ProbeResult, UnitObserved

    p = get_preset("sglang")
    s = initial(logs_available=True, stall_after=60)
    s = reduce(s, UnitObserved(1.0, UnitState("activating", invocation="h", started_at=1.0)), p)
    s = reduce(s, LogLine(2.0, "[2026-01-01 00:00:02] The server is fired up and ready to roll!", "h"), p)
    s = reduce(s, UnitObserved(4.0, UnitState("active", invocation="h", started_at=3.5)), p)  # the worker joined
    s = reduce(s, ProbeResult(3.2, "generate", True, 200, latency_s=0.1), p)  # sent before the worker started
    assert s.phase != Phase.READY
    s = reduce(s, ProbeResult(4.5, "generate", True, 200, latency_s=0.1), p)
    assert s.phase == Phase.READY and s.invocation == "h"
