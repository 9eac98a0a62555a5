"""What the reducer is fed: each observation of a unit, a log line, a probe, an action or the clock is one event
(`Event`), tied to its invocation where it carries one, so that `state = reduce(state, event, preset)` is a pure
function of them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from tui.model.phases import FailureKind


@dataclass(frozen=True, slots=True)
class Queued:
    """A run a scheduler holds in its queue (Slurm's PENDING): why, in the scheduler's own word (`Resources`,
    `Priority`, `ReqNodeNotAvail`, a QOS limit...), and when it expects to start it, where it says. `words` is the
    whole line as the manager tells it (the reducer has no clock to write a time with)."""

    reason: str
    expected_start: float | None = None
    words: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a scheduler says a run ended, where that is the cause: a time limit reached, a node lost, a preemption,
    a cancel by someone else, host memory exhausted, or an exit code (`kind` EXIT: the server's own log says why
    first, when it does). `words` name the scheduler's state and who or what; `hint` what to do about it."""

    kind: FailureKind
    words: str
    hint: str = ""


@dataclass(frozen=True, slots=True)
class UnitState:
    """What the service manager says about the unit (systemd `show`, or bringup's own process record)."""

    active: str  # active | activating | deactivating | inactive | failed | unknown
    sub: str = ""
    main_pid: int = 0
    invocation: str = ""
    exit_status: int | None = None
    n_restarts: int = 0
    started_at: float | None = None  # wall clock, seconds
    exited_at: float | None = None
    argv: tuple[str, ...] = ()
    #: the run has ended or failed, but some of its processes still run (a node of a deployment over several
    #: nodes outlived another's exit): a stop still has something to stop
    lingering: bool = False
    #: the node whose exit ended the run, on a deployment over several nodes: a failure names it
    ended_on: str = ""
    #: the run waits in a scheduler's queue (it is `activating`, with no node and no process yet)
    queued: Queued | None = None
    #: the scheduler's word on how the run ended, where it ended by it (set with `failed`)
    verdict: Verdict | None = None

    @property
    def running(self) -> bool:
        return self.active in ("active", "activating", "reloading")


@dataclass(frozen=True, slots=True)
class UnitObserved:
    at: float
    unit: UnitState


class LogLine(NamedTuple):
    """One line of server output, already split on newlines and carriage returns.

    A NamedTuple, not a dataclass: the overview of a fleet keeps 10,000 of them a deployment, and a tuple of
    strings and a float is untracked by Python's garbage collector, whose full passes over 50,000 dataclass
    instances (the console's log buffer of the time) stalled the console for 100+ ms during a log burst (keys
    waited). It is also cheaper to build, once per line.
    """

    at: float
    text: str
    invocation: str = ""
    #: the journal's cursor of this line (systemd only): how the tests prove that a reconnect neither lost nor
    #: repeated a line. Nothing else reads it
    cursor: str = ""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """An HTTP check of the endpoint. `kind` is connect | health | models | generate."""

    at: float
    kind: str
    ok: bool
    status: int | None = None
    detail: str = ""
    latency_s: float | None = None

    @property
    def sent_at(self) -> float:
        """When the request went out: an answer is evidence only about runs that had started by then (an old
        process still answering, seed 001, answers requests sent before the new run said it was ready)."""
        return self.at - (self.latency_s or 0.0)


class ReleaseSource(StrEnum):
    """Where a run's release was read: a line of its own log, or its HTTP answer."""

    LOG = "log"
    HTTP = "http"


@dataclass(frozen=True, slots=True)
class ReleaseReported:
    """The server named its release over HTTP (vLLM `GET /version`, SGLang `GET /server_info`), asked once a run
    through the probe's own client. `version` is the server's text as sent (the reducer checks it); `invocation`
    and `sent_at` tie the answer to the run it was asked of, as a probe's is: the old process of a restart can still
    answer, and its release is not the new run's."""

    at: float
    version: str
    path: str
    invocation: str = ""
    latency_s: float | None = None

    @property
    def sent_at(self) -> float:
        return self.at - (self.latency_s or 0.0)


@dataclass(frozen=True, slots=True)
class ReleaseSeen:
    """The release a run said it is: a known release's facts answer which flags and metrics it has. Only ever what
    the server said (`source`: its log or its HTTP answer), never inferred; `evidence` is the log line or the path."""

    version: str
    source: ReleaseSource
    at: float
    evidence: str = ""


@dataclass(frozen=True, slots=True)
class ActionTaken:
    """The operator (or the restart protocol) asked the manager to do something: start | stop | restart."""

    at: float
    action: str


class Action(StrEnum):
    """What the operator (or the restart protocol) can ask of the manager."""

    START = "start"
    STOP = "stop"
    RESTART = "restart"


@dataclass(frozen=True, slots=True)
class Tick:
    """The clock, with nothing else to say: the reducer has no clock of its own, so this is how `now` moves on and
    a stall gets noticed (a view of the state at a given moment is `reduce(state, Tick(moment))`)."""

    at: float


@dataclass(frozen=True, slots=True)
class MemoryObserved:
    """Total GPU memory used on the deployment's GPUs: a change counts as progress for stall detection."""

    at: float
    used_mib: float


@dataclass(frozen=True, slots=True)
class FlagsKnown:
    """The run's command line, read apart from a unit reading: an ended run's log is replayed with its flags
    known, so its failure gets the hint the live console gave (DFLASH + CUDA graphs, ...)."""

    at: float
    argv: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LogSourceKnown:
    """Where the server's whole log can be read (a file, `journalctl -u UNIT`): named when a run exits without a
    recognised error. Empty when unknown."""

    at: float
    where: str


@dataclass(frozen=True, slots=True)
class ProbeRequired:
    """Whether readiness needs a generation probe besides the ready line. Off while an ended run's log is read back:
    no generation can be asked of that run, and no older process can answer for it any more."""

    at: float
    required: bool


@dataclass(frozen=True, slots=True)
class NewsStopped:
    """Nothing has been heard from the host since `at` (the last reading): an outage begins there. It is a segment
    of its own in the timeline, not time counted to the phase last seen."""

    at: float
    reason: str = ""


@dataclass(frozen=True, slots=True)
class NewsResumed:
    """The host answers again (before the reading that follows is applied)."""

    at: float


Event = (UnitObserved | LogLine | ProbeResult | ActionTaken | Tick | MemoryObserved | NewsStopped | NewsResumed
         | FlagsKnown | LogSourceKnown | ProbeRequired | ReleaseReported)
