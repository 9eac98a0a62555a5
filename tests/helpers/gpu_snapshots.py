"""GPU snapshots and rows as the GPU panel's tests build and read them: the eight GPUs of a deployment, one host's
four GPUs held by two deployments and a stranger, a row's text."""

from __future__ import annotations

import time

from tui.model import GpuProcess, GpuSample, GpuSnapshot
from widgets.gpus import Row

#: the eight GPUs of a deployment
ALL = list(range(8))
GIB = 1024.0
TOTAL = 143771.0


def host_snapshot() -> GpuSnapshot:
    """Four GPUs of one host: 0-1 this deployment's (sim-c, pid 100), 2 held by sim-d's pid 4242, 3 by a process
    not listed (sim-d runs in a container: its PIDs are not the host's), 1 also by sim-d's 4243 (a conflict)."""
    used = {0: 60 * GIB, 1: 80 * GIB, 2: 70 * GIB, 3: 50 * GIB}
    gpus = tuple(GpuSample(index=i, mem_used_mib=used[i], mem_total_mib=TOTAL, util_pct=50.0) for i in range(4))
    procs = (GpuProcess(100, "python", 60 * GIB, gpu_index=0), GpuProcess(100, "python", 60 * GIB, gpu_index=1),
             GpuProcess(4243, "python", 20 * GIB, gpu_index=1), GpuProcess(4242, "python", 70 * GIB, gpu_index=2))
    return GpuSnapshot(at=time.time(), gpus=gpus, processes=procs)


def text(row: Row) -> str:
    return "".join(t for t, _ in row)
