"""The reducer's queued phase and a scheduler's endings (tui/lifecycle/reducer.py, failures.py): what a Slurm job's
readings make of a run, fed as the Slurm manager gives them (UnitState with `queued` and `verdict`)."""

from __future__ import annotations

from tests.helpers.past_runs import ARGV, T0
from tests.helpers.reducer_events import LOAD_BEGIN, READY_LINE, SGLANG, UVICORN_STARTED
from tui.lifecycle.eta import estimate, eta_words
from tui.lifecycle.history import Observed, options, record_of
from tui.lifecycle.reducer import LifecycleState, initial, reduce
from tui.lifecycle.run_record import RunRecord
from tui.model import (
    ActionTaken,
    FailureKind,
    LogLine,
    Phase,
    PhaseEta,
    ProbeResult,
    Queued,
    Transition,
    UnitObserved,
    UnitState,
    Verdict,
)

JOB = "12"


def queued(reason: str = "Resources", words: str = "", submitted: float = 100.0) -> UnitState:
    return UnitState(active="activating", sub="queued", invocation=JOB, started_at=submitted,
                     queued=Queued(reason, None, words or f"queued: {reason}"))


def running(started: float = 150.0) -> UnitState:
    return UnitState(active="active", sub="running on n1", invocation=JOB, started_at=started)


def ended(state: str, kind: FailureKind, words: str, status: int | None = None) -> UnitState:
    return UnitState(active="failed", sub=state.lower(), invocation=JOB, started_at=150.0, exited_at=400.0,
                     exit_status=status, verdict=Verdict(kind, words, f"hint for {state}"))


def feed(s: LifecycleState, *events: object) -> LifecycleState:
    for ev in events:
        s = reduce(s, ev, SGLANG)  # type: ignore[arg-type]
    return s


def line(at: float, text: str) -> LogLine:
    return LogLine(at, f"\u27e6n1\u27e7 {text}", JOB)


def ready_run() -> LifecycleState:
    s = feed(initial(), UnitObserved(101.0, queued()), UnitObserved(151.0, running()), line(152.0, UVICORN_STARTED),
             line(153.0, LOAD_BEGIN), line(160.0, READY_LINE))
    return feed(s, ProbeResult(161.0, "generate", True, 200, latency_s=0.1))


def test_a_queued_job_is_a_run_in_the_queued_phase_with_slurms_reason() -> None:
    s = feed(initial(), UnitObserved(101.0, queued("Resources", "queued: Resources (held by other jobs)")))
    assert s.phase == Phase.QUEUED
    assert s.invocation == JOB
    assert s.timeline[-1].line == "queued: Resources (held by other jobs)"
    assert s.stalled_for is None  # a queue is no hang, however long
    assert feed(s, UnitObserved(10_000.0, queued("Resources", "queued: Resources (held by other jobs)"))
                ).stalled_for is None


def test_the_reason_changing_rewrites_the_one_queued_phase() -> None:
    s = feed(initial(), UnitObserved(101.0, queued("Priority")), UnitObserved(102.0, queued("Resources")))
    assert [t.phase for t in s.timeline] == [Phase.QUEUED]
    assert s.timeline[-1].line == "queued: Resources"
    assert s.timeline[-1].at == 100.0  # entered when the job was submitted


def test_the_job_starting_moves_it_to_starting_then_on_with_its_log() -> None:
    s = feed(initial(), UnitObserved(101.0, queued()), UnitObserved(151.0, running(150.0)))
    assert s.phase == Phase.STARTING
    assert s.timeline[-1].at == 150.0 and s.timeline[-1].line == "running on n1"
    assert s.invocation_started == 150.0  # a generation counts only from the job's start
    s = ready_run()
    assert s.phase == Phase.READY
    assert [t.phase for t in s.timeline][:2] == [Phase.QUEUED, Phase.STARTING]


def test_a_probe_answered_before_the_job_started_is_no_evidence() -> None:
    s = feed(initial(), UnitObserved(101.0, queued()), UnitObserved(151.0, running(150.0)),
             line(160.0, READY_LINE), ProbeResult(149.0, "generate", True, 200, latency_s=0.1))
    assert s.phase != Phase.READY


def test_a_time_limit_is_the_failure_with_the_servers_last_lines_beside_it() -> None:
    s = ready_run()
    words = "Slurm ended job 12 at its time limit (00:05:00) (TIMEOUT)"
    s = feed(s, line(390.0, "[2026-05-29 17:06:00] SIGTERM received. signum=None frame=None. Draining requests and "
                            "shutting down..."),
             UnitObserved(401.0, ended("TIMEOUT", FailureKind.TIME_LIMIT, words)))
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert s.failure.kind == FailureKind.TIME_LIMIT
    assert s.failure.phase == Phase.READY  # the phase it was in before Slurm's SIGTERM
    assert s.failure.excerpt[-1] == words
    assert any("SIGTERM received" in x for x in s.failure.excerpt)  # the server's own log beside Slurm's word
    assert s.failure.hint == "hint for TIMEOUT"
    again = feed(s, UnitObserved(402.0, ended("TIMEOUT", FailureKind.TIME_LIMIT, words)))
    assert again.failure == s.failure and again.timeline == s.timeline  # said once


def test_slurms_word_stands_over_an_error_the_log_showed_on_the_way_out() -> None:
    s = feed(ready_run(), line(390.0, "[2026-05-29 17:06:00 TP0] Scheduler hit an exception: Traceback (most "
                                      "recent call last):"), line(390.1, "RuntimeError: NCCL error: remote process "
                                                                        "exited or there was a network error"))
    assert s.phase == Phase.FAILED
    s = feed(s, UnitObserved(401.0, ended("NODE_FAIL", FailureKind.NODE_FAIL, "Slurm ended job 12: its node n2 "
                                                                              "failed (NODE_FAIL)")))
    assert s.failure is not None and s.failure.kind == FailureKind.NODE_FAIL
    assert any("NCCL error" in x for x in s.failure.excerpt)
    assert s.failure.excerpt[-1].endswith("(NODE_FAIL)")


def test_an_exit_code_alone_leaves_the_servers_own_refusal_as_the_cause() -> None:
    s = feed(initial(), UnitObserved(101.0, queued()), UnitObserved(151.0, running()),
             line(152.0, "usage: sglang.launch_server [-h] [--model-path MODEL_PATH]"),
             line(152.1, "sglang.launch_server: error: unrecognized arguments: --no-such-flag"))
    s = feed(s, UnitObserved(160.0, ended("FAILED", FailureKind.EXIT, "job 12 FAILED: exit code 2", status=2)))
    assert s.phase == Phase.FAILED and s.failure is not None
    assert s.failure.kind == FailureKind.BAD_ARGS
    assert "--no-such-flag" in s.failure.hint


def test_an_exit_seen_completing_first_is_a_failure_not_a_stop() -> None:
    s = ready_run()
    s = feed(s, UnitObserved(300.0, UnitState(active="deactivating", sub="completing on n1", invocation=JOB,
                                               started_at=150.0)))
    assert s.phase == Phase.STOPPING
    s = feed(s, UnitObserved(301.0, ended("FAILED", FailureKind.EXIT, "job 12 FAILED: exit code 1", status=1)))
    assert s.phase == Phase.FAILED and s.failure is not None
    assert s.failure.kind == FailureKind.EXIT and s.failure.phase == Phase.READY


def test_a_stop_bringup_asked_is_a_stop() -> None:
    s = feed(ready_run(), ActionTaken(300.0, "stop"),
             UnitObserved(305.0, UnitState(active="inactive", sub="cancelled by bringup (op@host)", invocation=JOB,
                                           started_at=150.0, exited_at=304.0)))
    assert s.phase == Phase.STOPPED and s.failure is None


def test_a_job_cancelled_in_the_queue_by_someone_else_fails_in_the_queued_phase() -> None:
    s = feed(initial(), UnitObserved(101.0, queued()),
             UnitObserved(120.0, UnitState(active="failed", sub="cancelled", invocation=JOB, started_at=100.0,
                                           exited_at=119.0,
                                           verdict=Verdict(FailureKind.CANCELLED, "job 12 was cancelled by root "
                                                                                  "(CANCELLED)", "h"))))
    assert s.phase == Phase.FAILED and s.failure is not None
    assert s.failure.kind == FailureKind.CANCELLED and s.failure.phase == Phase.QUEUED
    assert s.failure.excerpt == ("job 12 was cancelled by root (CANCELLED)",)


# ---------------------------------------------------------------------------------------------------- the ETA


def _queued_past_run(i: int, queued_s: float) -> RunRecord:
    """A past job of the deployment: queued `queued_s`, then 5 s starting, 60 s loading, ready."""
    at = T0 + i * 1000
    marks = [(Phase.QUEUED, 0.0), (Phase.STARTING, queued_s), (Phase.LOADING, queued_s + 5.0),
             (Phase.READY, queued_s + 65.0)]
    tl = tuple(Transition(p, at + dt) for p, dt in marks)
    return record_of(Observed("k", f"{i}", at, ARGV, tl, Phase.READY, tl[-1].at), None)


def test_the_eta_of_a_queued_job_covers_its_queue_time_from_the_history() -> None:
    past = [_queued_past_run(i, q) for i, q in enumerate((100.0, 200.0, 300.0))]
    now = T0 + 10_000
    eta = estimate(past, deployment="k", invocation="12", flags=options(ARGV), phase=Phase.QUEUED,
                   timeline=(Transition(Phase.QUEUED, now - 50.0),), now=now)
    assert isinstance(eta, PhaseEta) and eta.phase == Phase.QUEUED
    assert eta.phase_left_s == 150.0  # the queue's median, 200 s, less the 50 s waited
    assert eta.ready_left_s == 150.0 + 65.0  # then the start-up's phases
    assert "queued" in eta_words(eta)
