"""A multi-node deployment's rules (tui/managers/multinode.py): an edit of the head's flags applied to each node
keeping what is its own, vLLM's headless workers keeping their switches, node tags in the excerpt and out of
matching, a worker's run bound to the head's, the GPUs grouped by host and keyed by node, a generation counted once
every node's run has started, the config of nodes. Two nodes of simulated servers: tests/e2e/test_multinode.py."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tui.config.deployments import parse_deployment
from tui.config.parts import ConfigError
from tui.config.settings import load
from tui.engine.node_gpus import merge
from tui.lifecycle.lines import clean, node_tag
from tui.lifecycle.nodes import describe_gpus, gpu_key, node_argv, pid_key
from tui.lifecycle.release import release_status
from tui.managers.multinode import MultiNodeManager, Node
from tui.model import GpuProcess, GpuSample, GpuSnapshot, UnitState


def _st(inv: str, active: str = "active", started: float = 1.0, status: int | None = None) -> UnitState:
    return UnitState(active=active, invocation=inv, started_at=started, exit_status=status, main_pid=10)


def _gpus(n: int, used: float, pid: int) -> GpuSnapshot:
    return GpuSnapshot(at=time.time(), gpus=tuple(GpuSample(i, mem_used_mib=used, mem_total_mib=1000.0)
                                                  for i in range(n)),
                       processes=tuple(GpuProcess(pid, "python3", used, gpu_index=i) for i in range(n) if used))


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
