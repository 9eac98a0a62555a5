"""Everything a front end shows about one deployment at one moment (`Snapshot`), with the lines shown beside the
phase (`Note`, placed by their source) and the throughput reading it carries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from tui.model.eta import NoEta, PhaseEta
from tui.model.events import ReleaseSeen, UnitState
from tui.model.gpus import Attribution, GpuSnapshot, NamedHolder
from tui.model.phases import CrashLoop, Failure, Phase, Transition

if TYPE_CHECKING:  # a type only: the facts are pure data of the domain layer, read by front ends off the Snapshot
    from tui.lifecycle.presets.facts import ReleaseMatch


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
    #: the server's name as its preset says it ("SGLang"): the console's header, beside the release
    server: str = ""
    #: what the manager runs (the unit, the container, the command): the console's header
    target: str = ""
    #: the GPUs the deployment runs on (configured, else those of the last sample)
    deployment_gpus: tuple[int, ...] = ()
    #: the memory other deployments of the host hold, each named (a fleet's engines know each other's)
    gpu_holders: tuple[NamedHolder, ...] = ()
    #: the share of each GPU's memory the server is told to take (its flags as the unit runs it, else its
    #: default): a GPU at it is normal, not warned; None for a server whose budget flag is not known
    memory_budget: float | None = None
