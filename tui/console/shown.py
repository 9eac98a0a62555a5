"""What the console knows of the deployment it shows, as its engine last reported it, and which panels that made due.

The app (tui/console/viewer.py) keeps one `Shown` and draws its panels from it at its refresh tick; showing another
deployment is a new `Shown`, so nothing of the last one (its steps, its chart, its GPUs) can be drawn over the next.
No Textual and no I/O here: the engine's updates go in, data comes out, and a test can feed it without an app.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tui.model import GpuSnapshot, NoteSource, Phase, Snapshot, Step, ThroughputSample

#: GPU memory samples the sparkline shows, and tokens/s samples the chart does
SPARK_SAMPLES = 60  # as many as the widest sparkline (widgets.gpus.SPARK_MAX)
CHART_SAMPLES = 300


class Panel(StrEnum):
    """The console's panels that are drawn from a `Shown` (the log is drawn as its lines come, not at the tick)."""

    LIFECYCLE = "lifecycle"
    GPUS = "gpus"
    THROUGHPUT = "throughput"


def empty_snapshot(name: str, host: str) -> Snapshot:
    """Before anything was read: not STOPPED (the server may well be READY), but not known yet."""
    return Snapshot(deployment=name, host=host, phase=Phase.UNKNOWN, invocation="", timeline=(), failure=None,
                    stalled_for=None, unit=None, gpus=None, throughput=None,
                    stale=f"connecting to {host}" if host else "connecting")


@dataclass
class Shown:
    snap: Snapshot
    gpu_snap: GpuSnapshot | None = None
    gpu_history: dict[int, Sequence[float]] = field(default_factory=dict)
    tp: ThroughputSample | None = None
    tp_history: list[tuple[float, float]] = field(default_factory=list)
    #: the steps of this console's own last action on the deployment (a restart's, a stop's), as they are reported
    steps: list[Step] = field(default_factory=list)
    #: that action is waiting for the GPU memory to be released: the GPU panel says so
    releasing: bool = False
    #: the panels whose data changed since they were last drawn
    due: set[Panel] = field(default_factory=set)

    @classmethod
    def nothing_yet(cls, name: str, host: str) -> Shown:
        return cls(empty_snapshot(name, host))

    @classmethod
    def caught_up(cls, snap: Snapshot) -> Shown:
        """An engine that has run for a while (one of the fleet's): what it has read so far, shown at once."""
        return cls(snap, snap.gpus, {i: h[-SPARK_SAMPLES:] for i, h in snap.gpu_history.items()}, snap.throughput,
                   list(snap.tps_history)[-CHART_SAMPLES:])

    def gpus_sampled(self, snap: GpuSnapshot, history: Mapping[int, Sequence[float]]) -> None:
        self.gpu_snap = snap
        self.gpu_history = {i: list(h)[-SPARK_SAMPLES:] for i, h in history.items()}
        self.due.add(Panel.GPUS)

    def throughput_sampled(self, sample: ThroughputSample, history: Sequence[tuple[float, float]]) -> None:
        self.tp = sample
        self.tp_history = list(history)[-CHART_SAMPLES:]
        self.due.add(Panel.THROUGHPUT)

    def phase_changed(self, snap: Snapshot, *, acting: bool) -> Snapshot:
        """The engine's new picture; `acting`: this console's own action runs (its steps are of this run). Returns
        the picture it replaces."""
        before = self.snap
        if snap.invocation != before.invocation and not acting:
            self.steps = []  # a run this console did not start: the steps of its own last action are history
        if snap.invocation != before.invocation and before.invocation:
            # a new run: the engine has dropped the old run's throughput, and so does the panel
            self.tp, self.tp_history = snap.throughput, list(snap.tps_history)[-CHART_SAMPLES:]
            self.due.add(Panel.THROUGHPUT)
        if snap.phase != before.phase:
            self.due.add(Panel.THROUGHPUT)  # its figures are labelled by whether the server serves: no sample says so
        if _gpu_facts(snap) != _gpu_facts(before):
            self.due.add(Panel.GPUS)
        self.snap = snap
        self.due.add(Panel.LIFECYCLE)
        return before

    def refreshed(self, snap: Snapshot) -> None:
        """The engine's picture as of its clock's second (`PictureTaken`): the lifecycle panel is drawn from it at
        every tick anyway; the GPU panel only when what it draws beside the samples moved."""
        if _gpu_facts(snap) != _gpu_facts(self.snap):
            self.due.add(Panel.GPUS)
        self.snap = snap

    def stepped(self, step: Step) -> None:
        self.steps.append(step)
        self.releasing = step.name == "release" and step.status == "running"

    def lifecycle_note(self, status: str, *, paused: bool) -> str:
        """The lifecycle panel's note: the console's own `status`, the pause, then every collector's note, the
        link's and another bringup's (the throughput's is the throughput panel's)."""
        first = "  ".join(part for part in (status, "PAUSED (p to resume)" if paused else "") if part)
        lines = [first, *(n.text for n in self.snap.notes if n.source != NoteSource.THROUGHPUT)]
        return "\n".join(line for line in lines if line)

    def throughput_note(self) -> str:
        """Why the throughput panel shows no figure, or what to know about the one it shows."""
        note = next((n.text for n in reversed(self.snap.notes) if n.source == NoteSource.THROUGHPUT), "")
        if self.tp is None and self.snap.phase == Phase.READY and not note:
            return "no metrics yet (no /metrics and no throughput log lines)"
        return note


def _gpu_facts(snap: Snapshot) -> tuple[object, ...]:
    """What the GPU panel draws of a snapshot, beside the samples: the deployment's GPUs, the run's process, whose
    the memory is, the other deployments' holdings, the memory budget."""
    return (snap.deployment_gpus, snap.unit.main_pid if snap.unit else 0, snap.attribution, snap.gpu_holders,
            snap.memory_budget)
