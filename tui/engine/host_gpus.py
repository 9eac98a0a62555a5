"""One GPU sampling stream per host, shared by every deployment on it.

Four deployments on one 8-GPU box each running their own `nvidia-smi -lms` would read the same GPUs four times
over the same SSH connection. A `HostGpuStream` runs one `GpuSampler` and hands each sample to every deployment's
tracker, which keeps its own view of it (its GPUs, its history, its attribution): the fleet overview costs one
stream per host, not one per deployment (tui/engine/fleet.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from tui.model import GpuSnapshot

from .gpu_sampler import GpuSampler

#: a sampler that fails outright (not a sample with an error: an exception) is started again after this long
RETRY_S = 2.0

Deliver = Callable[[GpuSnapshot], None]


class HostGpuStream:
    """The stream runs while at least one deployment follows it, and stops with the last one."""

    def __init__(self, sampler: GpuSampler) -> None:
        self.sampler = sampler
        #: the last sample, handed at once to a deployment that starts following (no wait for the next one)
        self.latest: GpuSnapshot | None = None
        self._followers: list[Deliver] = []
        self._backgrounds: list[Callable[[], bool]] = []
        self._task: asyncio.Task[None] | None = None
        sampler.quiet = self.quiet

    def quiet(self) -> bool:
        """No deployment of the host is being looked at: its GPUs' processes are asked for less often."""
        return bool(self._backgrounds) and all(bg() for bg in self._backgrounds)

    @property
    def followers(self) -> int:
        return len(self._followers)

    async def follow(self, deliver: Deliver, background: Callable[[], bool] = lambda: False) -> None:
        """Deliver every sample of the host to `deliver` until cancelled (an engine's GPU collector); `background`
        says whether that engine is in a fleet's background now."""
        self._followers.append(deliver)
        self._backgrounds.append(background)
        if self.latest is not None:
            deliver(self.latest)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"bringup-gpus-{self.sampler.transport.name}")
        try:
            await asyncio.Event().wait()  # until the engine cancels its collector
        finally:
            self._followers.remove(deliver)
            self._backgrounds.remove(background)
            if not self._followers and self._task is not None:
                task, self._task = self._task, None
                task.cancel()
                # until its command is reaped: a console that quits right after must not leave `nvidia-smi -lms`
                # running in a session of its own
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait({task}, timeout=3.0)

    async def once(self) -> GpuSnapshot | None:
        """One sample now, for a deployment that must not wait for the stream (a restart's release wait)."""
        return await self.sampler.once()

    def _deliver(self, snap: GpuSnapshot) -> None:
        self.latest = snap
        for fn in list(self._followers):
            fn(snap)

    async def _run(self) -> None:
        while True:
            try:
                await self.sampler.run(self._deliver)
                return  # a host without telemetry: its one sample said why
            except asyncio.CancelledError:
                raise
            except Exception as e:  # one host's sampler must never take its deployments' engines down
                self._deliver(GpuSnapshot(at=time.time(), error=f"GPU sampling: {type(e).__name__}: {e}"))
                await asyncio.sleep(RETRY_S)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                async with asyncio.timeout(3.0):
                    await self._task
            self._task = None
        self.sampler.close()
