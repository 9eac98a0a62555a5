"""The NVML source's isolation rules with a stand-in for the driver (the same code ran on a real H200:
benchmarks/gpu_h200.py, readings in tests/fixtures/gpu_h200/): a lost GPU is shown as lost while the others keep
reporting, an unsupported field is missing rather than zero, and no driver is one clear line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from tui.collectors.gpu_nvml import NvmlSource, NvmlUnavailable

MIB = 1024 * 1024


def err(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # returns the matching subclass, as the real binding raises


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state: dict[str, Any] = {"init": None}

    def init() -> None:
        if state["init"] is not None:
            raise state["init"]

    def handle(i: int) -> int:
        if i == 1:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return i

    def power(h: int) -> int:
        if h == 2:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 127_230

    patches = {
        "nvmlInit": init, "nvmlShutdown": lambda: None, "nvmlDeviceGetCount": lambda: 3,
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetUUID": lambda h: f"GPU-{h}", "nvmlDeviceGetName": lambda h: "NVIDIA H200",
        "nvmlDeviceGetMemoryInfo": lambda h, version=None: SimpleNamespace(used=103373 * MIB, total=143771 * MIB),
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=99, memory=30),
        "nvmlDeviceGetPowerUsage": power, "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlDeviceGetTemperature": lambda h, s: 60, "nvmlDeviceGetClockInfo": lambda h, c: 1740,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [SimpleNamespace(pid=457, usedGpuMemory=103364 * MIB)],
    }
    for name, fn in patches.items():
        monkeypatch.setattr(pynvml, name, fn)
    return state


def test_one_lost_gpu_does_not_hide_the_others(fake_nvml: dict[str, Any]) -> None:
    snap = NvmlSource().sample()
    g0, g1, g2 = snap.gpus
    assert not g0.lost and g0.mem_used_mib == 103373 and g0.power_w == 127.23 and g0.util_pct == 99
    assert g1.lost and "lost" in g1.error.lower() and g1.mem_used_mib is None
    assert not g2.lost and g2.power_w is None and g2.mem_used_mib == 103373  # unsupported is missing, not 0
    assert {(p.pid, p.gpu_index) for p in snap.processes} == {(457, 0), (457, 2)}


def test_no_driver_is_one_clear_line(fake_nvml: dict[str, Any]) -> None:
    fake_nvml["init"] = err(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver on this host"):
        NvmlSource()
    fake_nvml["init"] = err(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(NvmlUnavailable, match="driver not loaded"):
        NvmlSource()
