"""Plain data shared by the engine, the CLI and the console.

Everything here is a frozen dataclass or an enum with no I/O, so it can cross thread and process boundaries,
be rendered by widgets, and be serialised to JSON by the CLI without any of them knowing where it came from.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # a type only: the facts are pure data of the domain layer, read by front ends off the Snapshot
    from tui.lifecycle.presets.facts import ReleaseMatch


class Phase(StrEnum):
    """The public lifecycle vocabulary: UI, `--json` output and docs use exactly these names."""

    STOPPED = "stopped"
    STARTING = "starting"
    LOADING = "loading"
    GRAPH_CAPTURE = "graph-capture"
    WARMUP = "warmup"
    READY = "ready"
    FAILED = "failed"
    STOPPING = "stopping"
    #: shown, never reduced to: the unit has not been read yet, or no news has come from its host for a while
    #: (a frozen READY would be a claim about what was not seen)
    UNKNOWN = "unknown"


#: Order of the start-up phases; a live invocation only ever moves forward along it.
PROGRESS_ORDER: tuple[Phase, ...] = (
    Phase.STARTING,
    Phase.LOADING,
    Phase.GRAPH_CAPTURE,
    Phase.WARMUP,
    Phase.READY,
)


class FailureKind(StrEnum):
    OOM = "oom"
    CUDA_GRAPH = "cuda-graph"
    NCCL = "nccl"
    WARMUP = "warmup"
    SCHEDULER_DIED = "scheduler-died"
    PORT_IN_USE = "port-in-use"
    #: the server refused its command line (argparse): a flag this version does not know, or a bad value
    BAD_ARGS = "bad-args"
    #: a GPU kernel the server needs is not built for this GPU (no kernel image for its architecture, a quantized
    #: GEMM with no kernel for its compute capability, CUTLASS refusing it): a build, a quantization or a backend
    KERNEL = "kernel"
    EXIT = "exit"
    UNKNOWN = "unknown"


# ---------------------------------------------------------------- observations (events)


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


# ---------------------------------------------------------------- lifecycle results


@dataclass(frozen=True, slots=True)
class Transition:
    phase: Phase
    at: float
    line: str = ""


@dataclass(frozen=True, slots=True)
class Failure:
    phase: Phase
    kind: FailureKind
    excerpt: tuple[str, ...]
    hint: str
    at: float

    def as_dict(self) -> dict[str, object]:
        return {
            "phase": str(self.phase),
            "kind": str(self.kind),
            "excerpt": "\n".join(self.excerpt),
            "hint": self.hint,
        }


@dataclass(frozen=True, slots=True)
class CrashLoop:
    """Runs that failed one after another, each restarted (a service manager's `Restart=`, or anyone): the next
    run's start would otherwise hide the failure just before it, and with it the cause. `failed` runs failed between
    `since` (the first one's start) and `last.at`; `last` is the newest failure (the current run's, when it failed
    too), `cause` its line that says most; `restarts` the service manager's own count of its restarts (systemd's
    NRestarts), 0 where it keeps none."""

    failed: int
    since: float
    last: Failure
    cause: str = ""
    restarts: int = 0

    @property
    def words(self) -> str:
        """`3 runs failed in 4 min; the last: exit in loading: <cause>`."""
        span = max(0.0, self.last.at - self.since)
        dur = f"{span:.0f} s" if span < 90 else f"{span / 60:.0f} min" if span < 5400 else f"{span / 3600:.1f} h"
        by = f" (restarted {self.restarts} times by the service manager)" if self.restarts > 1 else \
            " (restarted once by the service manager)" if self.restarts == 1 else ""
        cause = f": {self.cause}" if self.cause else ""
        if self.failed == 1:
            return f"the run before failed{by}: {self.last.kind} in {self.last.phase}{cause}"
        return f"{self.failed} runs failed in {dur}{by}; the last: {self.last.kind} in {self.last.phase}{cause}"

    def as_dict(self) -> dict[str, object]:
        return {"failed": self.failed, "since": self.since, "restarts": self.restarts, "words": self.words,
                "cause": self.cause, "last": {**self.last.as_dict(), "at": self.last.at}}


# ---------------------------------------------------------------- GPUs


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    name: str
    used_mib: float | None
    gpu_uuid: str = ""
    gpu_index: int | None = None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one moment. Any value the source could not give is None, never 0."""

    index: int
    uuid: str = ""
    name: str = ""
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    lost: bool = False
    error: str = ""
    #: the host of this GPU, in a deployment over several nodes (its `index` is then a key: lifecycle/nodes.py)
    host: str = ""


@dataclass(frozen=True, slots=True)
class Attribution:
    """Whose memory is on the deployment's GPUs: this run's processes, the previous run's (still releasing), or
    others'. `note` says when it cannot be told (GPU PIDs from another PID namespace, e.g. a container)."""

    current_mib: float
    previous_mib: float
    other_mib: float
    previous_gpus: tuple[int, ...]
    note: str = ""


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    at: float
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    error: str = ""
    #: the error is one that waiting will not fix (the GPU command cannot be run: missing, not executable; no
    #: NVML): a release wait says it at once instead of waiting out its timeout for readings that cannot come
    permanent: bool = False

    def by_index(self) -> dict[int, GpuSample]:
        return {g.index: g for g in self.gpus}


# ---------------------------------------------------------------- throughput


@dataclass(frozen=True, slots=True)
class ThroughputSample:
    at: float
    tokens_per_s: float | None
    source: str  # metrics | log
    running: int | None = None
    queued: int | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    #: mean time to first token of the requests that started between two scrapes (from the histogram)
    ttft_s: float | None = None


class NoteSource(StrEnum):
    """Who a note is from: a front end places a note by its source, never by parsing its words."""

    #: the collectors, by the name their errors are filed under
    UNIT = "unit"
    LOGS = "logs"
    PROBE = "probe"
    GPUS = "gpus"
    METRICS = "metrics"
    NEWS = "news"
    #: the SSH connection to the host
    LINK = "ssh"
    #: another bringup holds the deployment's lock
    HOLDER = "holder"
    #: advice about throughput figures (the server serves no /metrics): the throughput panel's, not a fault
    THROUGHPUT = "throughput"


@dataclass(frozen=True, slots=True)
class Note:
    """One line a front end shows beside the phase. `text` is the whole line as shown (and as `bringup status`
    prints it), `source` says where it belongs."""

    source: NoteSource
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a front end shows about one deployment at one moment."""

    deployment: str
    host: str
    phase: Phase
    invocation: str
    timeline: tuple[Transition, ...]
    failure: Failure | None
    stalled_for: float | None
    unit: UnitState | None
    gpus: GpuSnapshot | None
    throughput: ThroughputSample | None
    flags: tuple[str, ...] = ()
    notes: tuple[Note, ...] = field(default_factory=tuple)
    #: the last probe of the endpoint, in words ("connect refused", "/health 503", "generation ok 0.12 s")
    endpoint: str = ""
    attribution: Attribution | None = None
    #: why the phase is unknown ("connecting to gpu-box", "no news from gpu-box for 12 s (last seen: ready)")
    stale: str = ""
    #: seconds since the GPU sample shown was taken, when that is more than a few sampling intervals
    gpus_stale_for: float | None = None
    #: the phase last seen, when `phase` is unknown
    last_phase: Phase | None = None
    #: the server's latest line about itself (a shard bar, a graph-capture batch): a bring-up's progress, or the
    #: last line before a stall
    latest_line: str = ""
    #: the current run's release as the server said it (its log or its HTTP answer); None until it has
    release_seen: ReleaseSeen | None = None
    #: the facts bringup goes by for that release, and how sure it is of them (an exact match, or which release's
    #: facts stand in); None until the release is known
    release: ReleaseMatch | None = None
    #: how long the start-up has left by this deployment's past runs (tui/lifecycle/eta.py), or why that cannot be
    #: told; None when no run is starting
    eta: PhaseEta | NoEta | None = None
    #: each GPU's memory history (MiB, oldest first) up to `gpus`: what a GPU panel opened now draws at once
    gpu_history: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    #: the tokens/s history (time, value) up to `throughput`
    tps_history: tuple[tuple[float, float], ...] = ()
    #: each collector's error while it cannot read its source (also among `notes`, in words): by collector name
    collector_errors: Mapping[str, str] = field(default_factory=dict)
    #: the runs that failed one after another up to this one (a unit restarted by `Restart=` after each crash),
    #: with the last failure's cause: None unless a run before this one failed and this one is not ready
    crash_loop: CrashLoop | None = None


# ---------------------------------------------------------------- how long a start-up has left


class EtaMatch(StrEnum):
    """Which past runs an ETA is read from: those with this run's flags, else those one flag apart (said so)."""

    SAME_FLAGS = "same-flags"
    ONE_FLAG_APART = "one-flag-apart"


@dataclass(frozen=True, slots=True)
class EtaBasis:
    """The past runs an ETA stands on: how many, how alike, and how long they took from start to ready."""

    runs: int
    match: EtaMatch
    fastest_s: float
    slowest_s: float
    #: the one flag those runs had otherwise (`--disable-cuda-graph`, `~ --tp-size 8 -> 4`), with ONE_FLAG_APART
    differs: str = ""


@dataclass(frozen=True, slots=True)
class PhaseEta:
    """The expected time left, for the current phase and until ready, from the deployment's own history, combined
    with the server's own progress where its line gives one. `slower` says a run slower than every past one."""

    phase: Phase
    phase_left_s: float
    ready_left_s: float
    basis: EtaBasis
    #: the server's own progress through the phase (0..1, a shard bar, capture batches), None when it gives none
    progress: float | None = None
    #: "loading 40 % slower than the last 3 runs", or ""
    slower: str = ""


@dataclass(frozen=True, slots=True)
class NoEta:
    """No ETA, and why: no guess is ever made without past runs to go by."""

    reason: str


# ---------------------------------------------------------------- actions: the lock, and a protocol's steps


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
