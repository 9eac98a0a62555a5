"""When is the old run's GPU memory released? Pure functions over a GpuSnapshot (no I/O, no engine), so the
restart protocol, the console and a benchmark on a real GPU all use the same rule."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tui.lifecycle.nodes import describe_gpus, describe_pid, host_names
from tui.model import Attribution, GpuSnapshot, NamedHolder, UnitState
from tui.words import noun

GIB = 1024.0


class OwnerKind(StrEnum):
    DEPLOYMENT = "deployment"
    USER = "user"


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose a process on the GPUs is, when it is not the deployment's own: another deployment configured on the
    host (its manager names the process as its run's), or another user of the host (the process's owner)."""

    kind: OwnerKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class OtherHolder:
    """Memory on the deployment's GPUs that someone else's processes hold (`owner`): a release wait does not wait
    for it (it is not going away because this deployment stopped), it names it."""

    owner: Owner
    pids: tuple[int, ...]
    by_gpu: tuple[tuple[int, float], ...]

    @property
    def mib(self) -> float:
        return sum(m for _, m in self.by_gpu)

    def describe(self, names: Sequence[str] = ()) -> str:
        """`230.0 GiB on GPU 0-7 held by deployment sim-b (pid 4242)`."""
        pids = ", ".join(describe_pid(p, names) for p in self.pids[:3]) + (", ..." if len(self.pids) > 3 else "")
        gpus = describe_gpus((i for i, m in self.by_gpu if m > 0), names)
        return (f"{self.mib / GIB:.1f} GiB on GPU {gpus} held by {self.owner} "
                f"({noun(len(self.pids), 'pid')} {pids})")


def describe_others(others: Iterable[OtherHolder], names: Sequence[str] = ()) -> str:
    return "; ".join(o.describe(names) for o in others)


@dataclass(frozen=True, slots=True)
class ReleaseStatus:
    released: bool
    held_mib: dict[int, float]
    holders: tuple[int, ...]
    #: the nodes' hosts, on a deployment over several nodes (GPU and PID keys are named by them)
    names: tuple[str, ...] = ()
    #: the memory others hold on the deployment's GPUs (another deployment's, another user's): not waited for
    others: tuple[OtherHolder, ...] = ()
    #: processes on the GPUs still held that are neither the old run's nor known to be anyone else's: waited for
    #: as the deployment's own (a process of its run that bringup did not list), and named
    unknown: tuple[int, ...] = ()

    def describe(self) -> str:
        total = sum(self.held_mib.values()) / GIB
        gpus = describe_gpus((i for i, v in sorted(self.held_mib.items()) if v > 0), self.names)
        pids = ", ".join(describe_pid(p, self.names) for p in self.holders)
        who = f" by {noun(len(self.holders), 'PID')} {pids}" if self.holders else ""
        if not who and self.unknown:
            shown = ", ".join(describe_pid(p, self.names) for p in self.unknown[:5])
            who = (f" by {noun(len(self.unknown), 'PID')} {shown}{', ...' if len(self.unknown) > 5 else ''} "
                   "(no other deployment's or user's that bringup knows)")
        if gpus:
            return f"{total:.1f} GiB held on GPU {gpus}{who}"
        return f"old processes still on the GPUs{who}" if who else "released"

    def others_mib(self) -> float:
        return sum(o.mib for o in self.others)


def release_status(snap: GpuSnapshot, gpus: Sequence[int], old_pids: set[int],
                   baseline: dict[int, float], tolerance_mib: float,
                   others: Mapping[int, Owner] | None = None) -> ReleaseStatus:
    """Is the old run's memory gone? Its processes must have left the GPUs and each GPU's memory must be back
    to the baseline measured before that run started (or, without one, to what other processes hold).

    `others`: processes known to be someone else's (another deployment's, another user's). Their memory is theirs
    whatever the baseline says: a baseline taken before another deployment started on the same GPUs would
    otherwise count its memory as this one's, and a start waited 10 minutes for a server that was not its own
    (issue 51). It is named in `others`, not waited for."""
    others = others or {}
    by_index = snap.by_index()
    held: dict[int, float] = {}
    holders: set[int] = set()
    unknown: set[int] = set()
    theirs: dict[Owner, tuple[set[int], dict[int, float]]] = {}
    for i in gpus:
        g = by_index.get(i)
        if g is None or g.mem_used_mib is None:
            continue
        procs = [p for p in snap.processes if p.gpu_index == i]
        old = [p for p in procs if p.pid in old_pids]
        holders.update(p.pid for p in old)
        their_mib = 0.0
        for p in procs:
            owner = others.get(p.pid) if p.pid not in old_pids else None
            if owner is None:
                continue
            pids, mib = theirs.setdefault(owner, (set(), {}))
            pids.add(p.pid)
            mib[i] = mib.get(i, 0.0) + (p.used_mib or 0.0)
            their_mib += p.used_mib or 0.0
        # without a baseline, what the others hold; with one, at least what others are known to hold now, whenever
        # it was taken
        base = baseline.get(i)
        base = sum(p.used_mib or 0.0 for p in procs if p.pid not in old_pids) if base is None else max(base, their_mib)
        extra = g.mem_used_mib - base
        held[i] = extra if extra > tolerance_mib or old else 0.0
        if held[i] > 0:
            unknown.update(p.pid for p in procs if p.pid not in old_pids and p.pid not in others)
    released = not holders and all(v <= 0 for v in held.values())
    named = tuple(OtherHolder(o, tuple(sorted(pids)), tuple(sorted(mib.items())))
                  for o, (pids, mib) in sorted(theirs.items(), key=lambda kv: (kv[0].kind, kv[0].name)))
    return ReleaseStatus(released, held, tuple(sorted(holders)), host_names(snap.gpus), named,
                         tuple(sorted(unknown)))


def has_no_run(unit: UnitState | None) -> bool:
    """The deployment runs nothing (stopped): no process of it is left, so no memory on its GPUs is its run's.
    A failed run may have left processes behind, and an unknown state says nothing: neither is told as none."""
    return unit is not None and unit.active == "inactive" and not unit.lingering


def own_memory_mib(unit: UnitState | None, attribution: Attribution | None) -> float | None:
    """The memory a deployment that runs nothing holds on its GPUs: its last run's, while that is still released
    (its processes known), else none (0.0); None while it runs or its state is not known (then what its GPUs hold is
    shown whole). A stopped deployment whose GPUs another deployment uses was shown with that one's 230 GiB as its
    own (issue 51)."""
    if not has_no_run(unit):
        return None
    return attribution.previous_mib if attribution is not None else 0.0


def attribute(snap: GpuSnapshot, gpus: Sequence[int], current: set[int] | None, previous: set[int],
              running: bool, others: Collection[int] = ()) -> Attribution:
    """Whose memory is on the deployment's GPUs. `others`: PIDs known to be other deployments' (the fleet knows
    them, `Neighbours`): their memory is others', and it does not make the server's own PIDs look unreadable."""
    mine = set(gpus)
    procs = [p for p in snap.processes if p.gpu_index in mine]
    used = {g.index: g.mem_used_mib for g in snap.gpus if g.mem_used_mib is not None}
    cur = prev = other = 0.0
    prev_gpus: set[int] = set()
    for p in procs:
        mib = p.used_mib or 0.0
        if current is not None and p.pid in current:
            cur += mib
        elif p.pid in previous:
            # a process list can lag the memory figures: a GPU whose memory is already back is not held by it
            if p.gpu_index in used:
                mib = min(mib, used[p.gpu_index])
            prev += mib
            if p.gpu_index is not None and mib > 0:
                prev_gpus.add(p.gpu_index)
        else:
            other += mib
    note = ""
    unexplained = [p for p in procs if p.pid not in others]
    if running and current and unexplained and cur == 0 and prev == 0:
        note = ("GPU processes are not the server's PIDs (another PID namespace? a container?): "
                "memory is not attributed")
    elif current is None and procs:
        note = "the server's processes are unknown here: memory is not attributed"
    return Attribution(cur, prev, other, tuple(sorted(prev_gpus)), note)


# ---------------------------------------------------------------------------------------------------- neighbours

#: memory on a GPU worth naming a deployment for by its GPU set alone (a CUDA context alone is about 0.5 GiB)
NEIGHBOUR_MIB = 1024.0


@dataclass(frozen=True, slots=True)
class Neighbours:
    """The other deployments configured on the same host, as whoever knows the fleet knows them: each one's
    processes (`pids`: PID -> deployment; its unit's main PID and its run's processes, the run before it too while
    that one releases), and the GPUs configured to those that are running (`gpus`: GPU -> deployments)."""

    pids: Mapping[int, str] = field(default_factory=dict)
    gpus: Mapping[int, tuple[str, ...]] = field(default_factory=dict)


def held_by_neighbours(snap: GpuSnapshot, neighbours: Neighbours, own: Collection[int] = (),
                       own_gpus: Collection[int] = ()) -> tuple[NamedHolder, ...]:
    """The memory on the host's GPUs that other deployments hold, each named. By their processes' PIDs first; then a
    GPU holding memory (NEIGHBOUR_MIB or more) with no process of theirs or ours (`own`: this deployment's PIDs,
    this run's and the last) listed on it, configured to exactly one running deployment, is that one's (its
    processes are not listed: another PID namespace, a container, a reader without processes) -- unless it is one
    of `own_gpus` (this deployment's, while it runs: the memory there may be its own, unseen). Sorted by name."""
    pids: dict[str, set[int]] = {}
    mib: dict[str, dict[int, float]] = {}
    claimed: set[int] = set()  # GPUs with a process of ours or theirs on them
    for p in snap.processes:
        if p.gpu_index is None:
            continue
        if p.pid in own:
            claimed.add(p.gpu_index)
            continue
        name = neighbours.pids.get(p.pid)
        if name is None:
            continue
        claimed.add(p.gpu_index)
        pids.setdefault(name, set()).add(p.pid)
        on = mib.setdefault(name, {})
        on[p.gpu_index] = on.get(p.gpu_index, 0.0) + (p.used_mib or 0.0)
    for g in snap.gpus:
        names = neighbours.gpus.get(g.index, ())
        if (g.index in claimed or g.index in own_gpus or len(names) != 1 or g.mem_used_mib is None
                or g.mem_used_mib < NEIGHBOUR_MIB):
            continue
        mib.setdefault(names[0], {})[g.index] = g.mem_used_mib
    return tuple(NamedHolder(name, tuple(sorted(pids.get(name, ()))), tuple(sorted(on.items())))
                 for name, on in sorted(mib.items()))
