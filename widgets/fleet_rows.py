"""The fleet overview's rows, as plain data: one deployment's row from its snapshot (`row_for`: its phase and how long
it has held, its failure, GPU memory and utilisation over its GPUs, tokens/s, the one most pressing note), and the
rows the table shows (`order`: the `/` filter, then the sort). The table that draws them is widgets/fleet.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from tui.lifecycle.release import own_memory_mib
from tui.model import NoteSource, Phase, Snapshot
from tui.words import duration
from widgets.lifecycle import RESTING

SortKey = Literal["name", "host", "phase"]

#: sorted by phase, what needs a look comes first: failed, not known (a host down), moving, then resting
PHASE_RANK = {p: i for i, p in enumerate((Phase.FAILED, Phase.UNKNOWN, Phase.STOPPING, Phase.QUEUED, Phase.STARTING,
                                          Phase.LOADING, Phase.GRAPH_CAPTURE, Phase.WARMUP, Phase.READY,
                                          Phase.STOPPED))}
HOST_DOWN = "host down"


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One deployment, as plain data. `since`: when its phase began (wall clock; None: not known); `util_pct`:
    the mean over its GPUs; `host_down`: why its host cannot be reached ("" when it can)."""

    name: str
    host: str
    phase: Phase
    since: float | None = None
    failure: str = ""
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    util_pct: float | None = None
    gpus_stale: bool = False
    tokens_per_s: float | None = None
    note: str = ""
    host_down: str = ""
    stalled: bool = False

    @property
    def phase_label(self) -> str:
        return HOST_DOWN if self.host_down else self.phase.value

    def matches(self, text: str) -> bool:
        """The overview's `/` filter: the text in its name, host or phase, any case."""
        t = text.lower()
        return not t or any(t in f.lower() for f in (self.name, self.host, self.phase_label))


def _note(snap: Snapshot, host_down: str, action_note: str = "") -> str:
    """The one line beside the figures, the most pressing first: the host, old news, how the console's own last
    action there ended (superseded, out of time), a stall, another bringup."""
    if host_down:
        last = f" (last seen: {snap.last_phase})" if snap.last_phase else ""
        return f"{host_down}{last}"
    if snap.stale:
        return snap.stale
    if action_note:
        return action_note
    if snap.stalled_for is not None:
        return f"STALLED {fmt_duration(snap.stalled_for, Phase.LOADING)}: no log line or GPU memory change"
    if snap.phase == Phase.QUEUED and snap.timeline and snap.timeline[-1].line:
        return snap.timeline[-1].line  # why a scheduler holds it (Slurm's reason): no endpoint to probe yet
    by_source = {n.source: n.text for n in reversed(snap.notes)}  # the first note of each source
    for source in (NoteSource.HOLDER, NoteSource.LINK, NoteSource.UNIT, NoteSource.LOGS, NoteSource.PROBE,
                   NoteSource.NEWS, NoteSource.GPUS, NoteSource.METRICS):
        if source in by_source:
            return by_source[source]
    if snap.gpus_stale_for is not None:
        return f"GPU readings {snap.gpus_stale_for:.0f} s old"
    return ""


def row_for(snap: Snapshot, gpus: Sequence[int], host_down: str = "", action_note: str = "") -> FleetRow:
    """A deployment's row from its snapshot: `gpus` are its GPUs (their memory and utilisation are summed);
    `action_note`: how the console's last action on it ended, when the phase does not say it."""
    since = None
    if snap.timeline and snap.timeline[-1].phase == snap.phase:
        since = snap.timeline[-1].at
    used = total = util = None
    if snap.gpus is not None and snap.gpus.gpus:
        mine = [g for g in snap.gpus.gpus if g.index in set(gpus)] if gpus else list(snap.gpus.gpus)
        if (u := [g.mem_used_mib for g in mine if g.mem_used_mib is not None]):
            used = sum(u)
        if (t := [g.mem_total_mib for g in mine if g.mem_total_mib is not None]):
            total = sum(t)
        if (p := [g.util_pct for g in mine if g.util_pct is not None]):
            util = sum(p) / len(p)
        # a deployment that runs nothing holds nothing but what its last run still releases: the memory and the work
        # on its GPUs are others' (a stopped one was shown with another's 230 GiB as its own: issue 51)
        own = own_memory_mib(snap.unit, snap.attribution)
        if own is not None:
            used, util = own, None
    tps = snap.throughput.tokens_per_s if snap.throughput is not None and snap.phase == Phase.READY else None
    return FleetRow(name=snap.deployment, host=snap.host, phase=snap.phase, since=since,
                    failure=snap.failure.kind.value if snap.failure is not None else "",
                    mem_used_mib=used, mem_total_mib=total, util_pct=util, gpus_stale=snap.gpus_stale_for is not None,
                    tokens_per_s=tps, note=_note(snap, host_down, action_note), host_down=host_down,
                    stalled=snap.stalled_for is not None)


def order(rows: Iterable[FleetRow], key: SortKey, reverse: bool = False, text: str = "") -> list[FleetRow]:
    """The rows the table shows, in its order: those matching the filter, sorted by `key` (then by name)."""
    shown = [r for r in rows if r.matches(text)]
    if key == "host":
        shown.sort(key=lambda r: (r.host, r.name), reverse=reverse)
    elif key == "phase":
        shown.sort(key=lambda r: (-1 if r.host_down else PHASE_RANK.get(r.phase, 99), r.name), reverse=reverse)
    else:
        shown.sort(key=lambda r: r.name, reverse=reverse)
    return shown


def fmt_duration(s: float, phase: Phase) -> str:
    """Time in a phase, whole seconds while it moves (loading, or hung?), whole minutes once it rests and a minute
    has passed: a ready row redraws once a minute, not every second."""
    return duration(s, tenths_below=0, resting=phase in RESTING)
