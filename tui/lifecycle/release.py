"""When is the old run's GPU memory released? Pure functions over a GpuSnapshot (no I/O, no engine), so the
restart protocol, the console and a benchmark on a real GPU all use the same rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.lifecycle.nodes import describe_gpus, describe_pid, host_names
from tui.lifecycle.nodes import ranges as ranges  # its old home: kept importable here
from tui.model import Attribution, GpuSnapshot

GIB = 1024.0


@dataclass(frozen=True, slots=True)
class ReleaseStatus:
    released: bool
    held_mib: dict[int, float]
    holders: tuple[int, ...]
    #: the nodes' hosts, on a deployment over several nodes (GPU and PID keys are named by them)
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        total = sum(self.held_mib.values()) / GIB
        gpus = describe_gpus((i for i, v in sorted(self.held_mib.items()) if v > 0), self.names)
        who = f" by PID {', '.join(describe_pid(p, self.names) for p in self.holders)}" if self.holders else ""
        if gpus:
            return f"{total:.1f} GiB held on GPU {gpus}{who}"
        return f"old processes still on the GPUs{who}" if who else "released"


def release_status(snap: GpuSnapshot, gpus: Sequence[int], old_pids: set[int],
                   baseline: dict[int, float], tolerance_mib: float) -> ReleaseStatus:
    """Is the old run's memory gone? Its processes must have left the GPUs and each GPU's memory must be back
    to the baseline measured before that run started (or, without one, to what other processes hold)."""
    by_index = snap.by_index()
    held: dict[int, float] = {}
    holders: set[int] = set()
    for i in gpus:
        g = by_index.get(i)
        if g is None or g.mem_used_mib is None:
            continue
        procs = [p for p in snap.processes if p.gpu_index == i]
        old = [p for p in procs if p.pid in old_pids]
        holders.update(p.pid for p in old)
        base = baseline.get(i)
        if base is None:
            base = sum(p.used_mib or 0.0 for p in procs if p.pid not in old_pids)
        extra = g.mem_used_mib - base
        held[i] = extra if extra > tolerance_mib or old else 0.0
    released = not holders and all(v <= 0 for v in held.values())
    return ReleaseStatus(released, held, tuple(sorted(holders)), host_names(snap.gpus))




def attribute(snap: GpuSnapshot, gpus: Sequence[int], current: set[int] | None, previous: set[int],
              running: bool) -> Attribution:
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
    if running and current and procs and cur == 0 and prev == 0:
        note = ("GPU processes are not the server's PIDs (another PID namespace? a container?): "
                "memory is not attributed")
    elif current is None and procs:
        note = "the server's processes are unknown here: memory is not attributed"
    return Attribution(cur, prev, other, tuple(sorted(prev_gpus)), note)
