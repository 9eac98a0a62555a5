"""The GPUs as read at one moment: each GPU's sample (None for what its source could not give, never 0), the
processes on them, and whose memory it is."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    name: str
    used_mib: float | None
    gpu_uuid: str = ""
    gpu_index: int | None = None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one moment. Any value the source could not give is None, never 0."""

    index: int
    uuid: str = ""
    name: str = ""
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    lost: bool = False
    error: str = ""
    #: the host of this GPU, in a deployment over several nodes (its `index` is then a key: lifecycle/nodes.py)
    host: str = ""


@dataclass(frozen=True, slots=True)
class Attribution:
    """Whose memory is on the deployment's GPUs: this run's processes, the previous run's (still releasing), or
    others'. `note` says when it cannot be told (GPU PIDs from another PID namespace, e.g. a container)."""

    current_mib: float
    previous_mib: float
    other_mib: float
    previous_gpus: tuple[int, ...]
    note: str = ""


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    at: float
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    error: str = ""
    #: the error is one that waiting will not fix (the GPU command cannot be run: missing, not executable; no
    #: NVML): a release wait says it at once instead of waiting out its timeout for readings that cannot come
    permanent: bool = False

    def by_index(self) -> dict[int, GpuSample]:
        return {g.index: g for g in self.gpus}


@dataclass(frozen=True, slots=True)
class NamedHolder:
    """GPU memory another deployment on the host holds: its name, its processes there (none: told by its GPU set,
    its processes not seen on the GPUs), and how much on each GPU (MiB)."""

    deployment: str
    pids: tuple[int, ...]
    by_gpu: tuple[tuple[int, float], ...]

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(i for i, _ in self.by_gpu)

    def mib_on(self, gpus: Collection[int]) -> float:
        return sum(mib for i, mib in self.by_gpu if i in gpus)

    def describe(self) -> str:
        """`held by deployment sim-d (pid 4242)`; by its GPU set alone, `held by deployment sim-d (running there)`."""
        if self.pids:
            shown = ", ".join(str(p) for p in self.pids[:3]) + (", ..." if len(self.pids) > 3 else "")
            return f"held by deployment {self.deployment} ({'pid' if len(self.pids) == 1 else 'pids'} {shown})"
        return f"held by deployment {self.deployment} (running there)"
