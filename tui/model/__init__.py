"""Plain data shared by the engine, the CLI and the console.

Everything here is a frozen dataclass or an enum with no I/O, so it can cross thread and process boundaries,
be rendered by widgets, and be serialised to JSON by the CLI without any of them knowing where it came from.

One module per idea: `phases` (the phases, the kinds of failure, what the reducer concludes), `events` (what the
reducer is fed), `gpus` (the GPUs at one moment), `snapshot` (what a front end shows, with its notes), `eta` (how
long a start-up has left), `actions` (the lock, a protocol's steps, its outcome). Every public name is re-exported
here, so `from tui.model import Snapshot` reads the same whichever module holds it.
"""

from __future__ import annotations

from tui.model.actions import LockInfo, Outcome, Result, Step, StepStatus
from tui.model.eta import EtaBasis, EtaMatch, NoEta, PhaseEta
from tui.model.events import (
    Action,
    ActionTaken,
    Event,
    FlagsKnown,
    LogLine,
    LogSourceKnown,
    MemoryObserved,
    NewsResumed,
    NewsStopped,
    ProbeRequired,
    ProbeResult,
    Queued,
    ReleaseReported,
    ReleaseSeen,
    ReleaseSource,
    Tick,
    UnitObserved,
    UnitState,
    Verdict,
)
from tui.model.gpus import Attribution, GpuProcess, GpuSample, GpuSnapshot, NamedHolder
from tui.model.phases import PROGRESS_ORDER, CrashLoop, Failure, FailureKind, Phase, Transition
from tui.model.snapshot import Note, NoteSource, Snapshot, ThroughputSample

__all__ = [
    "PROGRESS_ORDER", "Action", "ActionTaken", "Attribution", "CrashLoop", "EtaBasis", "EtaMatch", "Event", "Failure",
    "FailureKind", "FlagsKnown", "GpuProcess", "GpuSample", "GpuSnapshot", "LockInfo", "LogLine", "LogSourceKnown",
    "MemoryObserved", "NamedHolder", "NewsResumed", "NewsStopped", "NoEta", "Note", "NoteSource", "Outcome", "Phase",
    "PhaseEta", "ProbeRequired", "ProbeResult", "Queued", "ReleaseReported", "ReleaseSeen", "ReleaseSource", "Result",
    "Snapshot", "Step", "StepStatus", "ThroughputSample", "Tick", "Transition", "UnitObserved", "UnitState", "Verdict",
]
