"""The deployment's GPUs: the sample shown, each GPU's history, whose memory is whose,
and each GPU's memory before the last start (kept on disk).

No reducer and no listeners here: `GpuTracker.run` delivers samples to a callback and `accept` keeps them; the
engine decides what a sample means for the phase (memory is progress while loading) and who is told. The samples
come from a `GpuSampler` (gpu_sampler.py), the tracker's own, or from a `SharedGpus` stream: in a fleet its host's
one stream (host_gpus.py), over several nodes every node's merged (node_gpus.py).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tui.config.parts import HostConfig
from tui.guard.files import write_private
from tui.guard.numbers import MAX_COUNT, BadNumber, real, whole
from tui.lifecycle.release import Neighbours, attribute, held_by_neighbours
from tui.managers import Manager, ManagerError
from tui.model import Attribution, GpuSnapshot, NamedHolder, UnitState
from tui.transport import Transport, TransportError

from .gpu_sampler import GpuSampler

#: samples kept per series: 10 minutes at 1 Hz, fixed memory
HISTORY = 600
#: a run's processes are read this often while it spawns its workers
SPAWNING_PIDS_S = 3.0
#: once it is ready, its workers are up: its processes are read again when a process neither its own nor a
#: neighbour's appears on its GPUs (a worker respawned, a new one), at SPAWNING_PIDS_S at most, and at this pace
#: besides (a worker with no GPU, one that left): on screen (a restart from here stops what it last read)
SETTLED_PIDS_S = 15.0
#: the same, in a fleet's background: each reading is a round trip to the host per deployment
BACKGROUND_PIDS_S = 60.0
#: an error sample this soon after a good one is a hiccup: the good one stays on screen, the error becomes a note
_HICCUP_S = 5.0
#: the highest GPU index a baseline file may name (a host has a few dozen at most)
MAX_GPU_INDEX = 1023


class SharedGpus(Protocol):
    """A stream of samples the tracker follows instead of its own sampler: its host's one stream, shared with the
    other deployments on it (host_gpus.py), or every node's merged (node_gpus.py). Declared here, so the tracker
    needs neither module (they are built on the sampler, and the engine picks one)."""

    async def follow(self, deliver: Callable[[GpuSnapshot], None], background: Callable[[], bool]) -> None: ...

    async def once(self) -> GpuSnapshot | None: ...


@dataclass
class GpuHistory:
    mem: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    util: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))


class GpuTracker:
    def __init__(self, host: HostConfig, transport: Transport, configured: Sequence[int],
                 baseline_path: Path, *, shared: SharedGpus | None = None) -> None:
        self.host = host
        self.transport = transport
        #: the deployment's GPUs from its config; empty: every GPU of the host
        self.configured: tuple[int, ...] = tuple(configured)
        self.latest: GpuSnapshot | None = None
        self.history: dict[int, GpuHistory] = {}
        self._mem_history: dict[int, tuple[float, ...]] | None = None
        #: processes of the current run, and of the run before it (its memory may still be being released)
        self.run_pids: set[int] | None = set()
        self.previous_pids: set[int] = set()
        self._pids_inv = ""
        self._pids_at = -BACKGROUND_PIDS_S
        self._pids_known = False  # the last reading said which processes are the run's
        self._placed: frozenset[int] = frozenset()  # processes on its GPUs at the last reading, theirs or not
        #: the clock the readings' pace is kept by (a test's own)
        self.clock: Callable[[], float] = time.monotonic
        #: each GPU's memory before the last start, kept on disk: a `bringup start` after a stop it did not see (a
        #: separate `bringup stop`, a `systemctl stop` by hand) knows no old PIDs, and without this it would take
        #: memory still being released for another tenant's and start into a CUDA OOM
        self.baseline_path = baseline_path
        #: why the file's baseline was not taken (a number in it that is none), "" when it was or there is none
        self.baseline_note = ""
        self.baseline_mib: dict[int, float] = self._load_baseline()
        self.sampler = GpuSampler(host, transport)
        #: the host's one stream, shared with the other deployments on it (tui/engine/fleet.py); None: its own
        self.shared = shared
        #: whether the deployment is in a fleet's background (the engine says): a shared stream is quiet when all are
        self.background: Callable[[], bool] = lambda: False
        #: the other deployments on the host, their processes and GPUs, as whoever knows the fleet knows them
        #: (tui/engine/fleet.py sets it): memory they hold is named after them, not "other processes"
        self.neighbours: Callable[[], Neighbours] = Neighbours

    # ------------------------------------------------------------------ the stream

    async def run(self, deliver: Callable[[GpuSnapshot], None]) -> None:
        """Sample until cancelled (from the host's shared stream, when there is one)."""
        if self.shared is not None:
            await self.shared.follow(deliver, self.background)
        else:
            await self.sampler.run(deliver)

    def accept(self, snap: GpuSnapshot) -> bool:
        """Keep a sample as the one shown, and in the history. An error sample a moment after a good one is not
        kept (False): the last good figures stay, and the caller notes the error."""
        if snap.error and self.latest is not None and self.latest.gpus and snap.at - self.latest.at < _HICCUP_S:
            return False
        self.latest = snap
        self._mem_history = None
        for g in snap.gpus:
            h = self.history.setdefault(g.index, GpuHistory())
            if g.mem_used_mib is not None:
                h.mem.append(g.mem_used_mib)
            if g.util_pct is not None:
                h.util.append(g.util_pct)
        return True

    def mem_history(self) -> Mapping[int, tuple[float, ...]]:
        """Each GPU's memory history (MiB, oldest first), copied once per sample (every snapshot carries it)."""
        if self._mem_history is None:
            self._mem_history = {i: tuple(h.mem) for i, h in self.history.items()}
        return self._mem_history

    async def fresh(self, max_age: float = 1.5) -> GpuSnapshot | None:
        """A GPU snapshot no older than `max_age` seconds (from the stream, or a one-shot query)."""
        if self.latest is not None and time.time() - self.latest.at <= max_age and self.latest.gpus:
            return self.latest
        return await (self.shared.once() if self.shared is not None else self.sampler.once())

    def close(self) -> None:
        if self.shared is None:  # a shared stream is the fleet's to close
            self.sampler.close()

    # ------------------------------------------------------------------ the deployment's share

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]:
        snap = snap or self.latest
        if self.configured:
            return list(self.configured)
        return [g.index for g in snap.gpus] if snap else []

    def deployment_memory_mib(self, snap: GpuSnapshot) -> float | None:
        idx = set(self.deployment_gpus(snap))
        vals = [g.mem_used_mib for g in snap.gpus if g.index in idx and g.mem_used_mib is not None]
        return sum(vals) if vals else None

    def attribution(self, running: bool) -> Attribution | None:
        if self.latest is None or not self.latest.gpus:
            return None
        return attribute(self.latest, self.deployment_gpus(), self.run_pids, self.previous_pids, running=running,
                         others=self.neighbours().pids)

    def named_holders(self, running: bool) -> tuple[NamedHolder, ...]:
        """The memory on the host's GPUs that other deployments configured on it hold, each named (none without a
        fleet: a console on one deployment knows no other's processes). `running`: whether this deployment runs
        (its GPUs' memory may then be its own, unseen, and is not put down to another's GPU set)."""
        if self.latest is None or not self.latest.gpus:
            return ()
        return held_by_neighbours(self.latest, self.neighbours(), (self.run_pids or set()) | self.previous_pids,
                                  self.deployment_gpus() if running else ())

    def _on_its_gpus(self) -> frozenset[int]:
        """The processes the last sample lists on the deployment's GPUs."""
        snap = self.latest
        if snap is None:
            return frozenset()
        gpus = set(self.deployment_gpus(snap))
        return frozenset(p.pid for p in snap.processes if p.gpu_index in gpus)

    async def refresh_pids(self, manager: Manager, unit: UnitState, settled: bool = False) -> None:
        """Which processes are this run's (for GPU memory attribution and the release wait): every SPAWNING_PIDS_S
        while the run is spawning its workers; once it is ready (`settled`), when a process no one has placed
        appears on its GPUs, and every SETTLED_PIDS_S (BACKGROUND_PIDS_S in a fleet's background); at once for a
        new run."""
        if unit.invocation != self._pids_inv or not unit.running:
            if self.run_pids:
                self.previous_pids = set(self.run_pids)
            self.run_pids = set() if self.run_pids is not None else None
            self._pids_inv = unit.invocation if unit.running else ""
            self._pids_at = -BACKGROUND_PIDS_S
            self._pids_known = False
            self._placed = frozenset()
        if not unit.running:
            return
        on_gpus = self._on_its_gpus()
        since = self.clock() - self._pids_at
        if settled and self._pids_known and since < (BACKGROUND_PIDS_S if self.background() else SETTLED_PIDS_S):
            others = self.neighbours().pids
            unplaced = {p for p in on_gpus - self._placed if p not in (self.run_pids or ()) and p not in others}
            if not unplaced or since < SPAWNING_PIDS_S:
                return
        elif since < SPAWNING_PIDS_S:
            return
        self._pids_at = self.clock()
        self._pids_known = False  # a reading that fails, or cannot say, is tried again at the spawning pace
        try:
            self.run_pids = await manager.pids(unit)
        except (TransportError, ManagerError, OSError):
            return
        if self.run_pids is None:
            return
        self._pids_known = True
        self._placed = on_gpus  # after this reading, those not its own are someone else's: asked about once

    # ------------------------------------------------------------------ the baseline

    def _load_baseline(self) -> dict[int, float]:
        """The file's baseline, its numbers taken as every number from outside is (tui/guard/numbers.py: a GPU's
        index in digits, its MiB finite and from 0): a file with one that is none is no baseline (`baseline_note`
        says why), as a file that is missing or not JSON."""
        try:
            raw = json.loads(self.baseline_path.read_text())
        except (OSError, ValueError):  # none yet, or not ours to trust
            return {}
        try:
            if not isinstance(raw, dict):
                raise BadNumber(f"{self.baseline_path.name}: not an object of GPU: MiB")
            return {whole(k, "a GPU's index", low=0, high=MAX_GPU_INDEX, text=True):
                    real(v, f"GPU {k}'s memory (MiB)", low=0.0, high=MAX_COUNT) for k, v in raw.items()}
        except BadNumber as e:
            self.baseline_note = f"the GPU baseline ({self.baseline_path.name}) was not taken: {e}"[:200]
            return {}

    def save_baseline(self, snap: GpuSnapshot) -> None:
        """Each GPU's memory now, just before a start: what "released" means for the next stop."""
        self.baseline_mib = {g.index: g.mem_used_mib for g in snap.gpus if g.mem_used_mib is not None}
        with contextlib.suppress(OSError):  # a read-only state dir loses only this safeguard, not the start
            write_private(self.baseline_path, json.dumps(self.baseline_mib))  # 0600, no link followed
