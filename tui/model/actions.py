"""What an action holds and ends with: the deployment's lock (who holds it, for what), a protocol's steps, and the
outcome of a restart, start or stop. The one clock of the model is here: `Step.at`'s default and `LockInfo`'s
words."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from tui.model.phases import Failure, Phase


@dataclass(frozen=True, slots=True)
class LockInfo:
    """Who holds a deployment's lock, for what, and since when: written next to the lock so that a refusal, a
    console and `bringup wait` on another machine can all name the holder."""

    who: str
    pid: int
    since: float
    purpose: str
    #: the flag change the holder is making ("" for none): a console shows it while someone else restarts
    change: str = ""
    #: unique per taking: proves a record is this holder's and not a later one's
    token: str = ""
    #: the holder's latest step ("release: waiting for GPU memory ..."), for others to follow it
    step: str = ""

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.since)) if self.since else "?"
        change = f": {self.change}" if self.change else ""
        step = f"; now: {self.step}" if self.step else ""
        return f"{self.who} (pid {self.pid}) {self.purpose} since {when}{change}{step}"


class StepStatus(StrEnum):
    """Where one step of a protocol stands. The values are what `--json` prints and a sweep's records hold."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Step:
    name: str  # lock | flags | stop | release | start | follow | rollback
    status: StepStatus
    detail: str = ""
    at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        # a status read back from a record (a string) is the same status; a word that is none is an error here,
        # not a step every reader would mark as unknown
        object.__setattr__(self, "status", StepStatus(self.status))


class Result(StrEnum):
    """How a restart, start or stop ended: one value per way, each with its own exit status and its own advice.

    A rollback is one of them, not a fact beside another result: the protocol rolls back only after its own run
    failed (never after a refusal, a timeout or another's run), so a rolled-back outcome is always that failure;
    how the rollback itself went is in its message and phase."""

    #: ready, started (not waited for), stopped, or nothing to stop
    DONE = "done"
    #: our run failed (or the action failed, the host could not be reached): worth trying again once fixed
    FAILED = "failed"
    #: our run failed and the last flags that reached ready were started again
    ROLLED_BACK = "rolled-back"
    #: nothing was attempted: another holds the deployment's lock (its run is not ours to judge or undo)
    LOCK_HELD = "lock-held"
    #: nothing was attempted: the flags changed since they were confirmed, or a permanent error
    REFUSED = "refused"
    #: refused after a wait: no GPU readings showed the old run's memory released, so nothing was started (a stop
    #: is not called done)
    UNVERIFIED = "unverified"
    #: a step did not finish in time (the release, the new run, ready): the run may still come up
    TIMED_OUT = "timed-out"
    #: not this command's result: another run replaced ours, or the lock was lost and things changed meanwhile
    SUPERSEDED = "superseded"


@dataclass(frozen=True, slots=True)
class Outcome:
    result: Result
    phase: Phase
    message: str
    failure: Failure | None = None
    invocation: str = ""
    steps: tuple[Step, ...] = ()
    #: how long the server took to stop, when this command stopped it
    stop_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.result is Result.DONE

    @property
    def took_lock(self) -> bool:
        """The protocol held the deployment's lock: what failed after it is this command's doing."""
        return any(s.name == "lock" and s.status is StepStatus.DONE for s in self.steps)
