"""What the engine tells its front ends, one frozen dataclass per kind of news, named as past events.

A front end dispatches on the type (a `match`), so a new kind of update is a new class the type checker knows
about, not a string that a chain of `if`s has to spell the same way. Each carries what a front end draws from it:
a listener never has to reach back into the engine, whose state may have moved on by the time it draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tui.lifecycle.lines import LineKind
from tui.model import GpuSnapshot, LockInfo, LogLine, Note, ProbeResult, Snapshot, ThroughputSample


@dataclass(frozen=True, slots=True)
class PhaseChanged:
    """The phase, the timeline, the failure, the run or its known release changed: the picture as of that moment."""

    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class LogsRead:
    """Lines of the server's log, in the order read: a run's log read back, or a batch of the followed one; with
    each line's kind for the errors view (`kinds[i]` is `lines[i]`'s), decided with the preset's fatal wordings
    as the reducer read it: a front end shows it, and classifies nothing."""

    lines: tuple[LogLine, ...]
    kinds: tuple[LineKind, ...]

    def __post_init__(self) -> None:
        if len(self.kinds) != len(self.lines):
            raise ValueError(f"{len(self.lines)} lines with {len(self.kinds)} kinds")


@dataclass(frozen=True, slots=True)
class GpusSampled:
    """A GPU sample taken, with each GPU's memory history (MiB, oldest first) up to and including it."""

    snapshot: GpuSnapshot
    history: Mapping[int, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class ThroughputSampled:
    """A throughput sample (from /metrics or the log), with the tokens/s history (time, value) up to it."""

    sample: ThroughputSample
    history: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class ProbeAnswered:
    """A probe of the endpoint came back (the answer is also fed to the reducer)."""

    result: ProbeResult


@dataclass(frozen=True, slots=True)
class CollectorFailed:
    """A collector could not read its source; `note` says which and why (it is also among the snapshot's notes
    until the collector reads again)."""

    note: Note


@dataclass(frozen=True, slots=True)
class HolderChanged:
    """Another bringup took or let go of the deployment's lock (None: nobody else holds it now)."""

    holder: LockInfo | None


@dataclass(frozen=True, slots=True)
class PictureTaken:
    """The whole picture as of a tick of the engine's one-second clock grid (engine/grid.py), told to a front end
    that draws by the clock (the console: a phase's age, an ETA, a stale reading, a note), only while one asks for
    it (`Engine.pictures`): the one way such a front end learns what changed between the other updates."""

    snapshot: Snapshot


Update = (PictureTaken | PhaseChanged | LogsRead | GpusSampled | ThroughputSampled | ProbeAnswered | CollectorFailed
          | HolderChanged)
