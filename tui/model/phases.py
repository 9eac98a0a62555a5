"""The lifecycle's vocabulary: the phases a run goes through, the kinds of failure, and what the reducer concludes
from them (a phase reached, a failure, the runs that failed one after another)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Phase(StrEnum):
    """The public lifecycle vocabulary: UI, `--json` output and docs use exactly these names."""

    STOPPED = "stopped"
    #: a scheduler holds the run in its queue (Slurm's PENDING): no node, no process, no log yet; the reason and
    #: the expected start are the scheduler's (the transition's line)
    QUEUED = "queued"
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
    Phase.QUEUED,
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
    #: a scheduler ended the run, and said why (tui/managers/slurm_job.py: Slurm's job states): its time limit,
    #: a node it lost, a preemption, a cancel by someone else; the server's own log is shown beside it
    TIME_LIMIT = "time-limit"
    NODE_FAIL = "node-fail"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"


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
