"""Where one host's GPU samples come from: NVML here, nvidia-smi over the transport, or nothing (said why).

Apart from the tracker (gpus.py) and the host's shared stream (host_gpus.py), which are both built on it: one
sampler can serve every deployment on a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

from tui.collectors.gpu_nvml import NvmlSource, NvmlUnavailable
from tui.collectors.gpu_smi import SmiSource
from tui.config.parts import HostConfig
from tui.model import GpuSnapshot
from tui.transport import Transport

from .grid import sleep_on_grid

#: GPU panels redraw once a second; the release wait of a restart queries the GPUs itself, every 200 ms
GPU_INTERVAL_S = 1.0


class GpuSampler:
    """Where one host's GPU samples come from (NVML here, nvidia-smi over the transport, or nothing), and the
    stream of them. Apart from the tracker so that one stream can serve every deployment on a host."""

    def __init__(self, host: HostConfig, transport: Transport) -> None:
        self.host = host
        self.transport = transport
        self._source: SmiSource | NvmlSource | None = None
        self._why_none = ""
        #: whether every deployment reading this host's GPUs is in the background (host_gpus.py says)
        self.quiet: Callable[[], bool] = lambda: False

    def _source_for_host(self) -> SmiSource | NvmlSource | None:
        src = self.host.gpu_source
        if src == "none":
            self._why_none = "GPU telemetry off for this host"
            return None
        if src in ("auto", "nvml") and self.host.is_local:
            try:
                return NvmlSource()
            except NvmlUnavailable as e:
                self._why_none = str(e)
                if src == "nvml":
                    return None
        return SmiSource(self.transport, self.host.nvidia_smi, interval_ms=int(GPU_INTERVAL_S * 1000),
                         quiet=lambda: self.quiet())

    async def run(self, deliver: Callable[[GpuSnapshot], None]) -> None:
        """Sample until cancelled; a host without telemetry delivers one sample that says why, and ends."""
        self._source = self._source_for_host()
        src = self._source
        if src is None:
            deliver(GpuSnapshot(at=time.time(), error=self._why_none))
            return
        if isinstance(src, NvmlSource):
            while True:
                deliver(await asyncio.to_thread(src.sample))
                await sleep_on_grid(GPU_INTERVAL_S)
        else:
            async with contextlib.aclosing(src.stream()) as snaps:
                async for snap in snaps:
                    if snap.permanent:  # it cannot be run: said as such, and why NVML was not used either
                        snap = replace(snap, error=(self._why_none + "; " if self._why_none else "")
                                       + "nvidia-smi cannot be run: " + snap.error.removeprefix("nvidia-smi: "))
                    deliver(snap)

    async def once(self) -> GpuSnapshot | None:
        """One sample now (None: the host has no telemetry)."""
        if self._source is None:
            self._source = self._source_for_host()
        src = self._source
        if src is None:
            return None
        return await asyncio.to_thread(src.sample) if isinstance(src, NvmlSource) else await src.once()

    def close(self) -> None:
        if isinstance(self._source, NvmlSource):
            self._source.close()
