"""GPU samples from NVML (nvidia-ml-py, module `pynvml`) for the local host.

Each GPU and each field is read in isolation: a field the GPU does not support is None, a GPU that fails is
marked lost, and the others keep updating. Memory uses the v2 struct so `used` matches nvidia-smi (v1 counts
the driver's reserved memory as used). Calls take microseconds, but they block, so callers run `sample()` in a
thread.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tui.model import GpuProcess, GpuSample, GpuSnapshot

T = TypeVar("T")
MIB = 1024 * 1024


class NvmlUnavailable(Exception):
    """NVML cannot be used here; the message says why in one line."""


def _field(fn: Callable[[], T]) -> T | None:
    import pynvml

    try:
        return fn()
    except pynvml.NVMLError_NotSupported:
        return None
    except pynvml.NVMLError as e:
        if isinstance(e, (pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_Unknown)):
            raise
        return None


class NvmlSource:
    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise NvmlUnavailable("nvidia-ml-py is not installed") from None
        self.nvml: Any = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_LibraryNotFound:
            raise NvmlUnavailable("no NVIDIA driver on this host (NVML library not found)") from None
        except pynvml.NVMLError_DriverNotLoaded:
            raise NvmlUnavailable("no NVIDIA driver on this host (driver not loaded)") from None
        except pynvml.NVMLError as e:
            raise NvmlUnavailable(f"NVML failed to start: {e}") from None
        self.count = pynvml.nvmlDeviceGetCount()
        #: handle, UUID and name per GPU: they do not change while the driver is loaded, and every NVML call is a
        #: driver round trip (under gVisor, an intercepted ioctl); dropped when the GPU stops answering
        self._static: dict[int, tuple[Any, str, str]] = {}

    def _one(self, i: int) -> tuple[GpuSample, list[GpuProcess]]:
        n = self.nvml
        try:
            if i not in self._static:
                h = n.nvmlDeviceGetHandleByIndex(i)
                self._static[i] = (h, _field(lambda: n.nvmlDeviceGetUUID(h)) or "",
                                   _field(lambda: n.nvmlDeviceGetName(h)) or "")
            h, uuid, name = self._static[i]
            mem = _field(lambda: n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2))
            util = _field(lambda: n.nvmlDeviceGetUtilizationRates(h))
            power = _field(lambda: n.nvmlDeviceGetPowerUsage(h))
            limit = _field(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
            procs = _field(lambda: n.nvmlDeviceGetComputeRunningProcesses(h)) or []
            sample = GpuSample(
                index=i, uuid=uuid, name=name,
                mem_used_mib=mem.used / MIB if mem else None, mem_total_mib=mem.total / MIB if mem else None,
                util_pct=float(util.gpu) if util else None, mem_util_pct=float(util.memory) if util else None,
                temp_c=_field(lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
                power_w=power / 1000 if power is not None else None,
                power_limit_w=limit / 1000 if limit is not None else None,
                sm_clock_mhz=_field(lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
            )
            plist = [GpuProcess(pid=p.pid, name="", gpu_uuid=uuid, gpu_index=i,
                                used_mib=(p.usedGpuMemory / MIB) if p.usedGpuMemory is not None else None)
                     for p in procs]
            return sample, plist
        except n.NVMLError as e:
            self._static.pop(i, None)
            return GpuSample(index=i, lost=True, error=str(e)), []

    def sample(self) -> GpuSnapshot:
        gpus, procs = [], []
        for i in range(self.count):
            g, p = self._one(i)
            gpus.append(g)
            procs.extend(p)
        return GpuSnapshot(at=time.time(), gpus=tuple(gpus), processes=tuple(procs))

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()
