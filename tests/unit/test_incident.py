"""The incident record (tui/lifecycle/incident.py): which run it is of, and what it says of it, in Markdown and as
one object."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.engine.history import HistoryStore, history_path
from tui.engine.incident_file import write_record
from tui.lifecycle.history import Observed, previous_of, record_of, upsert
from tui.lifecycle.incident import NoSuchRun, incident, markdown, pick, record_command
from tui.lifecycle.run_record import ActionRecord, GpuStep, RunRecord
from tui.model import Failure, FailureKind, Phase, Transition

T0 = 1_800_000_000.0
ARGV = ("python3", "-m", "sglang.launch_server", "--model-path", "/m/k26", "--tp-size", "8", "--api-key", "sk-1")
DFLASH = ("--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8")
EXCERPT = ("Traceback (most recent call last):", '  File "cuda_graph_runner.py", line 1021, in replay',
           "torch.AcceleratorError: CUDA error: an illegal memory access was encountered")


def ready_run(i: int) -> Observed:
    at = T0 + i * 1000
    tl = tuple(Transition(p, at + dt) for p, dt in ((Phase.STARTING, 0), (Phase.LOADING, 5), (Phase.GRAPH_CAPTURE, 75),
                                                    (Phase.WARMUP, 95), (Phase.READY, 105)))
    return Observed("k26", f"ready{i}", at, ARGV, tl, Phase.READY, tl[-1].at, host="gpu-box", unit="k26.service",
                    release="0.5.23", gpu_used_mib=900_000.0)


def failed_run() -> Observed:
    at = T0 + 10_000
    tl = tuple(Transition(p, at + dt) for p, dt in ((Phase.STARTING, 0), (Phase.LOADING, 5), (Phase.GRAPH_CAPTURE, 90),
                                                    (Phase.WARMUP, 110), (Phase.FAILED, 112)))
    failure = Failure(Phase.WARMUP, FailureKind.CUDA_GRAPH, EXCERPT,
                      "restart with CUDA graphs off (`bringup restart k26 --set disable-cuda-graph`)", tl[-1].at)
    steps = (GpuStep(at - 30, "stop", 1_000_000.0, 0.0, 1_000_000.0, 0.0),
             GpuStep(at - 2, "start", 2048.0, 0.0, 0.0, 2048.0), GpuStep(at + 112, "failed", 1_050_000.0))
    actions = (ActionRecord(at - 31, "ops@laptop pid 7", "stop"), ActionRecord(at - 1, "ops@laptop pid 7", "start"))
    return Observed("k26", "failed0123456789", at, (*ARGV, *DFLASH), tl, Phase.FAILED, tl[-1].at, failure=failure,
                    host="gpu-box", unit="k26.service", gpu_steps=steps, actions=actions)


def runs() -> list[RunRecord]:
    out: list[RunRecord] = []
    for o in (ready_run(0), ready_run(1), failed_run()):
        out = upsert(out, record_of(o, previous_of(out, o.invocation, o.started_at)))
    return out


def test_the_record_of_a_failed_run_names_the_failure_the_change_and_the_way_back() -> None:
    history = runs()
    run = pick(history, "k26")
    assert run.invocation == "failed0123456789"  # the default: the latest run that did not reach ready
    d = incident(run, history)
    assert d["failure"]["kind"] == "cuda-graph" and d["failure"]["phase"] == "warmup"
    assert "illegal memory access" in d["failure"]["excerpt"]
    assert d["flags_diff_last_ready"] == ["+ --speculative-algorithm DFLASH", "+ --speculative-dflash-block-size 8"]
    assert d["go_back"] == ["bringup restart k26 --unset speculative-algorithm --unset speculative-dflash-block-size"]
    assert [t["phase"] for t in d["timeline"]] == ["starting", "loading", "graph-capture", "warmup", "failed"]
    # two flags from every ready run: no "usual" (issue 51: runs of other flags were mixed in, unsaid)
    assert d["timeline"][1]["seconds"] == 85 and d["timeline"][1]["usual_s"] is None
    assert d["compared_with"] == {"runs": 0, "same_flags": False, "one_flag_apart": None}
    assert [s["step"] for s in d["gpu_steps"]] == ["stop", "start", "failed"]
    start = next(a for a in d["actions"] if a["action"] == "start")
    assert start["change"] == "+ --speculative-algorithm DFLASH, + --speculative-dflash-block-size 8"
    md = markdown(d)
    for expected in ("# k26: run failed012345 failed", "**cuda-graph** in **warmup**",
                     "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
                     "+ --speculative-algorithm DFLASH", "| loading |", "## GPU memory at each step",
                     "| stop | 976.6 GiB | 0.0 GiB | 976.6 GiB | 0.0 GiB |", "| run under way | run before it |",
                     "ops@laptop pid 7",
                     "bringup restart k26 --unset speculative-algorithm --unset speculative-dflash-block-size",
                     "k26.service"):
        assert expected in md, (expected, md)
    assert "sk-1" not in md and "***" in md  # secrets as everywhere else


def test_pick_by_invocation_prefix_and_its_refusals() -> None:
    history = runs()
    assert pick(history, "k26", "ready1").invocation == "ready1"
    with pytest.raises(NoSuchRun, match="matches several runs"):
        pick(history, "k26", "ready")
    with pytest.raises(NoSuchRun, match="is not on record"):
        pick(history, "k26", "nope")
    with pytest.raises(NoSuchRun, match="no runs of k26 on record yet"):
        pick([], "k26")
    ok = [r for r in history if r.invocation.startswith("ready")]
    assert pick(ok, "k26").invocation == "ready1"  # every run ready: the latest
    assert record_command("k26", "failed0123456789") == "bringup record k26 failed012345"


def test_a_run_with_the_flags_of_the_last_ready_one_says_so_and_restarts_as_is() -> None:
    history = runs()
    d = incident(pick(history, "k26", "ready1"), history)
    assert d["flags_diff_last_ready"] == [] and d["go_back"] == ["bringup restart k26  # the flags are the last "
                                                                  "ready run's already"]
    d0 = incident(pick(history, "k26", "ready0"), history)
    assert d0["last_ready"] is None and d0["go_back"] == []
    assert "nothing known-good to go back to" in markdown(d0)


def test_write_record_writes_the_file_where_the_console_and_the_command_say(tmp_path: Path) -> None:
    store = HistoryStore(history_path(tmp_path, "k26"))
    for r in runs():
        store.put(lambda _runs, r=r: r)
    path, d, text = write_record(tmp_path, "k26")
    assert path == tmp_path / "deployments" / "k26" / "records" / "failed012345.md"
    assert path is not None and path.read_text() == text and d["invocation"] == "failed0123456789"
    assert write_record(tmp_path, "k26", "ready1", "-")[0] is None
