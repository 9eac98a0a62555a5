"""Following a deployment until it is ready, failed, stopped or out of time: `bringup wait`, and the headless demo.

A protocol like the restart's: `wait` reports what it notices as typed events through `on_event`, and its outcome
is the last of them, so a renderer says how the wait ended before its caller does anything else (the demo stops
its server after it). The CLI renders the events as text lines or JSON Lines; nothing here prints.

It never declares "stopped" from one look: a unit seen stopped is given `STOPPED_GRACE_S`, and a restart or start
under way (its lock held) is waited for, since between its stop and its start the unit looks stopped too.

It reports what is true now, never an old run's news as if new: the phases of a run that had stopped before the
wait first saw it (its log read back: starting ... ready, stopping, stopped) are not reported; the wait ends with
"stopped", its current state. A run seen running is followed from its first phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from tui.managers import ManagerError
from tui.model import Failure, Phase, Transition
from tui.transport import TransportError

if TYPE_CHECKING:
    from tui.lifecycle.reducer import LifecycleState

__all__ = [
    "STOPPED_GRACE_S", "BecameReady", "FailureFound", "FoundStopped", "GaveUp", "PhaseReached", "ProblemNoticed",
    "StallNoticed", "TimedOut", "WaitEngine", "WaitEvent", "WaitOutcome", "wait",
]

#: a unit seen stopped this long, with no restart or start in progress, is not going to become ready by itself
STOPPED_GRACE_S = 2.0
#: a stall is said once it has held this long in one phase: a log being read back passes through stale phases
STALL_SAID_AFTER_S = 1.0
#: the longest between two looks at the engine when nothing changes (the stopped grace and the deadline)
LOOK_EVERY_S = 0.5


# ---------------------------------------------------------------------------- what it reads of an engine


class HolderLock(Protocol):
    async def holder(self) -> object | None:
        """The live holder of the deployment's lock, None when no one holds it."""
        ...


class LockOwner(Protocol):
    def lock(self, purpose: str) -> HolderLock: ...


class WaitEngine(Protocol):
    """The members of the engine that `wait` reads: a test or another front end can follow anything that has them."""

    @property
    def state(self) -> LifecycleState: ...
    @property
    def host_name(self) -> str: ...
    @property
    def manager(self) -> LockOwner: ...
    @property
    def collector_errors(self) -> Mapping[str, str]: ...
    @property
    def permanent_error(self) -> Exception | None: ...
    @property
    def unit_seen_at(self) -> float | None: ...

    def endpoint_mismatch(self) -> str: ...
    def stall_note(self) -> str: ...
    def named(self, failure: Failure | None) -> Failure | None: ...
    async def settle_failure(self) -> None: ...
    async def wait_changed(self, timeout: float) -> None: ...


# ---------------------------------------------------------------------------- events, as they happen


@dataclass(frozen=True, slots=True)
class PhaseReached:
    """A phase of the run followed, in order; `since_first` counts from the first phase this wait reported."""

    phase: Phase
    at: float
    line: str
    since_first: float


@dataclass(frozen=True, slots=True)
class ProblemNoticed:
    """The host cannot be reached, the unit cannot be read, or probes cannot succeed: said at once, not after the
    whole timeout, and said again only when it changes. The wait goes on (a rebooting host comes back)."""

    problem: str
    source: str  # the collector: unit | probe


@dataclass(frozen=True, slots=True)
class StallNoticed:
    """No log progress and no GPU memory change for a while in one phase: said once a stall."""

    note: str
    phase: Phase
    stalled_for: float


# ---------------------------------------------------------------------------- outcomes, the last event


@dataclass(frozen=True, slots=True)
class _Ended:
    #: the word scripts read in the last JSON line
    result: ClassVar[str] = ""
    phase: Phase
    invocation: str


@dataclass(frozen=True, slots=True)
class BecameReady(_Ended):
    result: ClassVar[str] = "ready"


@dataclass(frozen=True, slots=True)
class FailureFound(_Ended):
    """The run failed; the failure is whole (its traceback given a moment to arrive) and names the deployment."""

    result: ClassVar[str] = "failed"
    failure: Failure


@dataclass(frozen=True, slots=True)
class FoundStopped(_Ended):
    """Stopped, and no restart or start under way: nothing is going to become ready."""

    result: ClassVar[str] = "stopped"


@dataclass(frozen=True, slots=True)
class TimedOut(_Ended):
    result: ClassVar[str] = "timeout"
    after_s: float
    #: the last problem noticed, if it still held: often why it timed out
    problem: str
    stalled_for: float | None
    #: whether the unit's state was ever read (else the phase is no news, only where the reducer began)
    state_read: bool


@dataclass(frozen=True, slots=True)
class GaveUp(_Ended):
    """Waiting will not fix this: an unknown host key, a unit that is not there, sudo refused."""

    result: ClassVar[str] = "error"
    error: str


WaitOutcome = BecameReady | FailureFound | FoundStopped | TimedOut | GaveUp
WaitEvent = PhaseReached | ProblemNoticed | StallNoticed | WaitOutcome


# ---------------------------------------------------------------------------- the protocol


def _stopped(s: LifecycleState) -> bool:
    """Stopped as the unit reports it, not merely not seen yet: only then can `wait` say so and return."""
    return s.phase == Phase.STOPPED and s.unit is not None and not s.unit.running


def _over(s: LifecycleState) -> bool:
    """The run the state is of has stopped (or is stopping) and its process is gone: its phases are history."""
    return s.phase in (Phase.STOPPED, Phase.STOPPING) and s.unit is not None and not s.unit.running


async def _start_in_progress(engine: WaitEngine) -> bool:
    """Whether a restart, start or stop holds the deployment's lock: the unit looks stopped between its stop and
    its start. Reads the holder's record and checks the holder is alive on the host; never takes the lock (that,
    even for a moment, could refuse a real restart)."""
    try:
        return await engine.manager.lock("wait").holder() is not None
    except (ManagerError, TransportError, OSError):
        return True  # cannot tell: keep waiting


def _problem(engine: WaitEngine, stale_after: float) -> tuple[str, str]:
    """What keeps the state from being news, and which collector says so; ("", "") when nothing does."""
    unit_err = engine.collector_errors.get("unit", "")
    if unit_err:
        return f"cannot read its state: {unit_err}", "unit"
    mismatch = engine.endpoint_mismatch()
    if mismatch:
        return mismatch, "probe"
    seen = engine.unit_seen_at
    if seen is not None and time.time() - seen > stale_after:
        return (f"no news from {engine.host_name} for over {stale_after:g} s (a dead link, or a hung host?)",
                "unit")
    return "", ""


class _Stall:
    """Says STALLED once a stall, when it has held for a moment in one phase."""

    def __init__(self) -> None:
        self.since: tuple[Phase, float] | None = None
        self.said = False

    def noticed(self, note: str, phase: Phase) -> bool:
        if not note:
            self.since, self.said = None, False
        elif self.since is None or self.since[0] != phase:
            self.since = (phase, time.monotonic())
        elif not self.said and time.monotonic() - self.since[1] >= STALL_SAID_AFTER_S:
            self.said = True
            return True
        return False


async def wait(engine: WaitEngine, timeout: float, on_event: Callable[[WaitEvent], None], *, stale_after: float,
               min_invocation: str = "") -> WaitOutcome:
    """Follow `engine` (already started) until its run is ready or failed, the unit is found stopped, waiting
    cannot help, or `timeout` seconds pass. With `min_invocation`, phases and the end are those of a later run
    only. Every event goes to `on_event`, the outcome last, and the outcome is returned.

    `stale_after`: how old the last reading of the unit may be before it is no news (the engine's
    `STALE_AFTER_S`; given by the caller, since `ops` reads the engine only through `WaitEngine`)."""
    def end(outcome: WaitOutcome) -> WaitOutcome:
        on_event(outcome)
        return outcome

    deadline = time.monotonic() + timeout
    shown: tuple[Transition, ...] = ()
    t_first: float | None = None
    stopped_at: float | None = None
    reported = ""
    stall = _Stall()
    #: the runs (by invocation) this wait has seen under way, or that began after it did: only their phases are news
    live: set[str] = set()
    began = time.time()
    while True:
        s = engine.state
        if (s.unit is None or s.unit.running or not _over(s)
                or (s.invocation_started is not None and s.invocation_started >= began)
                or (min_invocation and s.invocation and s.invocation != min_invocation)):
            live.add(s.invocation)
        if engine.permanent_error is not None:
            return end(GaveUp(s.phase, s.invocation, str(engine.permanent_error)))
        problem, source = _problem(engine, stale_after)
        if problem and problem != reported:
            on_event(ProblemNoticed(problem, source))
        reported = problem
        note = engine.stall_note()
        if stall.noticed(note, s.phase):
            on_event(StallNoticed(note, s.phase, s.stalled_for or 0.0))
        fresh = not min_invocation or (s.invocation and s.invocation != min_invocation)
        if fresh and s.timeline != shown and s.invocation in live:
            for t in s.timeline[len(shown):] if s.timeline[: len(shown)] == shown else s.timeline:
                t_first = t_first or t.at
                on_event(PhaseReached(t.phase, t.at, t.line, t.at - t_first))
            shown = s.timeline
        if fresh and s.phase == Phase.READY:
            return end(BecameReady(s.phase, s.invocation))
        if fresh and s.phase == Phase.FAILED and s.failure is not None:
            await engine.settle_failure()
            settled = engine.state
            failure = engine.named(settled.failure or s.failure)
            assert failure is not None  # named() keeps a failure a failure
            return end(FailureFound(settled.phase, settled.invocation, failure))
        if not _stopped(s):
            stopped_at = None
        elif stopped_at is None:
            stopped_at = time.monotonic()
        elif time.monotonic() - stopped_at >= STOPPED_GRACE_S:
            if not await _start_in_progress(engine):
                return end(FoundStopped(s.phase, s.invocation))
            stopped_at = time.monotonic()  # a restart is under way: look again later
        left = deadline - time.monotonic()
        if left <= 0:
            return end(TimedOut(s.phase, s.invocation, timeout, reported, s.stalled_for, s.unit is not None))
        await engine.wait_changed(min(left, LOOK_EVERY_S))
