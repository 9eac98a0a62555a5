"""A crash loop (tui/lifecycle/crash_loop.py, the reducer's `earlier`): under systemd's `Restart=` each failed run is
followed at once by the next run's start, which used to forget the failure and its cause. The runs failed one after
another are counted and the last failure stays in the answer until a run is ready or the deployment is stopped."""

from __future__ import annotations

from collections.abc import Iterable

from tui.cli.report import render_status, snapshot_dict
from tui.lifecycle.crash_loop import crash_loop
from tui.lifecycle.presets import get_preset
from tui.lifecycle.reducer import LifecycleState, initial, reduce
from tui.model import ActionTaken, Event, FailureKind, LogLine, Phase, ProbeResult, Snapshot, UnitObserved, UnitState

SGLANG = get_preset("sglang")
# the released wheels (0.5.23 `model_runner.py`); sglang #23602 for the scheduler's exception line
LOAD_BEGIN = "[2026-05-29 16:59:48 TP0 EP0] Load weight begin. avail mem=94.00 GB"
SCHED_EXC = "[2026-06-02 08:00:20 TP0 EP0] Scheduler hit an exception: Traceback (most recent call last):"
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "139.81 GiB of which 1.12 GiB is free.")
FRAME = '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 520, in x'
READY_LINE = "[2026-05-29 17:05:40] The server is fired up and ready to roll!"


def unit(at: float, inv: str, *, active: str = "active", sub: str = "running", restarts: int = 0,
         exit_status: int | None = None, started: float | None = None) -> UnitObserved:
    return UnitObserved(at, UnitState(active=active, sub=sub, main_pid=4242, invocation=inv,
                                      started_at=at if started is None else started, exit_status=exit_status,
                                      n_restarts=restarts))


def feed(events: Iterable[Event], s: LifecycleState | None = None) -> LifecycleState:
    s = s if s is not None else initial()
    for ev in events:
        s = reduce(s, ev, SGLANG)
    return s


def oom_run(t0: float, inv: str, restarts: int) -> list[Event]:
    """A run that loads and dies of an OOM its log names (the scheduler's traceback)."""
    return [unit(t0, inv, restarts=restarts), LogLine(t0 + 1, LOAD_BEGIN, inv), LogLine(t0 + 2, SCHED_EXC, inv),
            LogLine(t0 + 2, "Traceback (most recent call last):", inv), LogLine(t0 + 2, FRAME, inv),
            LogLine(t0 + 2, OOM, inv)]


def test_the_next_run_keeps_the_last_failure_and_its_cause() -> None:
    s = feed([*oom_run(100.0, "a", 0), unit(104.0, "b", restarts=1)])
    assert s.phase == Phase.STARTING and s.failure is None, "the restarted run is the current one"
    loop = crash_loop(s)
    assert loop is not None
    assert loop.failed == 1
    assert loop.last.kind == FailureKind.OOM
    assert loop.cause == OOM[:300]
    assert loop.words.startswith("the run before failed (restarted once by the service manager): oom in loading: ")


def test_three_runs_in_a_loop_are_counted() -> None:
    s = feed([*oom_run(100.0, "a", 0), *oom_run(110.0, "b", 1), *oom_run(120.0, "c", 2), unit(130.0, "d", restarts=3)])
    loop = crash_loop(s)
    assert loop is not None
    assert loop.failed == 3
    assert loop.since == 100.0
    assert loop.restarts == 3
    assert loop.words.startswith("3 runs failed in 22 s (restarted 3 times by the service manager); the last: oom")


def test_a_failed_current_run_is_the_last_of_the_loop() -> None:
    s = feed([*oom_run(100.0, "a", 0), *oom_run(110.0, "b", 1)])
    loop = crash_loop(s)
    assert loop is not None and s.phase == Phase.FAILED
    assert loop.failed == 2
    assert loop.last == s.failure


def test_a_death_without_an_error_line_seen_in_the_restart_gap() -> None:
    # no fatal line: the unit shows the gap systemd's Restart= leaves (`activating`/`auto-restart`, the old run's
    # invocation and exit status), which reads as running
    s = feed([unit(100.0, "a"), LogLine(101.0, LOAD_BEGIN, "a"),
              unit(103.0, "a", active="activating", sub="auto-restart", exit_status=1, started=100.0),
              unit(104.0, "b", restarts=1)])
    loop = crash_loop(s)
    assert loop is not None, "the run that died is a failed run, not a run replaced"
    assert loop.last.kind == FailureKind.EXIT
    assert loop.last.phase == Phase.LOADING
    assert loop.cause.startswith("the server process exited with status 1")
    assert loop.last.excerpt[0] == LOAD_BEGIN, "the last lines of its log, kept"


def test_a_death_seen_only_as_the_restart_counter() -> None:
    # the gap (100 ms by default) fell between two readings: the next run is up and NRestarts went up by one
    s = feed([unit(100.0, "a"), LogLine(101.0, LOAD_BEGIN, "a"), unit(104.0, "b", restarts=1)])
    loop = crash_loop(s)
    assert loop is not None
    assert loop.last.phase == Phase.LOADING


def test_a_restart_asked_for_is_no_failure() -> None:
    s = feed([unit(100.0, "a"), LogLine(101.0, LOAD_BEGIN, "a"), ActionTaken(102.0, "restart"),
              unit(104.0, "b", restarts=1)])
    assert crash_loop(s) is None


def test_the_loop_ends_when_a_run_is_ready_or_the_deployment_stops() -> None:
    s = feed([*oom_run(100.0, "a", 0), unit(104.0, "b", restarts=1), LogLine(105.0, READY_LINE, "b"),
              ProbeResult(at=106.0, kind="generate", ok=True, status=200)])
    assert s.phase == Phase.READY
    assert crash_loop(s) is None
    s = feed([*oom_run(100.0, "a", 0), unit(104.0, "b", restarts=1), ActionTaken(105.0, "stop"),
              unit(106.0, "b", active="inactive", sub="dead"), unit(200.0, "c")])
    assert crash_loop(s) is None


def test_status_says_the_loop_and_the_last_cause() -> None:
    s = feed([*oom_run(100.0, "a", 0), *oom_run(110.0, "b", 1), unit(114.0, "c", restarts=2)])
    loop = crash_loop(s)
    snap = Snapshot(deployment="k2", host="gpu-box", phase=s.phase, invocation=s.invocation, timeline=s.timeline,
                    failure=None, stalled_for=None, unit=s.unit, gpus=None, throughput=None, crash_loop=loop)
    d = snapshot_dict(snap, {}, 115.0)
    assert d["crash_loop"]["failed"] == 2
    assert d["crash_loop"]["last"]["kind"] == "oom"
    assert d["crash_loop"]["cause"] == OOM[:300]
    text = render_status(d)
    assert "CRASH LOOP: 2 runs failed in 12 s" in text
    assert "the last run failed in loading: oom" in text
    assert OOM[:60] in text
