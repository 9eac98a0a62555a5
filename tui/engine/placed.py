"""A run a scheduler places (managers/placement.py): its GPUs read on the nodes it landed on, its endpoint probed on
its head node, both following the run from one placement to the next.

- `PlacedGpus` is the deployment's GPU stream (a `SharedGpus`, like node_gpus.py's): while a run is placed, every
  node's nvidia-smi through the command the placement gives (`srun --jobid=J --overlap -w NODE nvidia-smi`),
  merged and keyed by node; between runs, the GPUs as the scheduler lists them (the manager's `unplaced_gpus`).
  A new placement (a restart that landed elsewhere) starts the streams again on its nodes.
- `follow_endpoint` hands the engine the URL that reaches the placed run's endpoint: through a port forward on the
  manager's host's SSH connection when the transport forwards (the head node as that host reaches it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from tui.collectors.gpu_smi import SmiSource
from tui.managers import ManagerError
from tui.managers.placement import Placed, Placement
from tui.model import GpuSnapshot
from tui.transport import Forwarding, Transport, TransportError

from .gpu_sampler import GPU_INTERVAL_S
from .grid import sleep_on_grid
from .node_gpus import merge

Deliver = Callable[[GpuSnapshot], None]


def _key(p: Placement | None) -> tuple[str, tuple[str, ...]] | None:
    return (p.run, p.nodes) if p is not None else None


class PlacedGpus:
    """The GPUs of the placed run, or the scheduler's list of them between runs (see the module)."""

    def __init__(self, manager: Placed, transport: Transport) -> None:
        self.manager = manager
        self.transport = transport
        self.latest: GpuSnapshot | None = None

    def _sources(self, p: Placement, quiet: Callable[[], bool]) -> list[SmiSource]:
        return [SmiSource(self.transport, cmd, interval_ms=int(GPU_INTERVAL_S * 1000), quiet=quiet)
                for cmd in p.gpu_commands]

    async def _unplaced(self) -> GpuSnapshot:
        try:
            return await self.manager.unplaced_gpus()
        except (TransportError, ManagerError, OSError) as e:
            return GpuSnapshot(at=time.time(), error=f"GPUs as the scheduler lists them: {e}")

    async def follow(self, deliver: Deliver, background: Callable[[], bool] = lambda: False) -> None:
        while True:
            p = self.manager.placement()
            if p is None:
                self.latest = await self._unplaced()
                deliver(self.latest)
                while _key(self.manager.placement()) is None:
                    await sleep_on_grid(GPU_INTERVAL_S)
                continue
            task = asyncio.create_task(self._stream(p, deliver, background), name="bringup-placed-gpus")
            try:
                while _key(self.manager.placement()) == _key(p) and not task.done():
                    await sleep_on_grid(GPU_INTERVAL_S)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _stream(self, p: Placement, deliver: Deliver, background: Callable[[], bool]) -> None:
        parts: list[GpuSnapshot | None] = [None] * len(p.nodes)

        def on(i: int, snap: GpuSnapshot) -> None:
            parts[i] = snap
            self.latest = merge(p.nodes, parts)
            deliver(self.latest)

        async def one(i: int, src: SmiSource) -> None:
            async with contextlib.aclosing(src.stream()) as snaps:
                async for snap in snaps:
                    on(i, snap)

        await asyncio.gather(*(one(i, s) for i, s in enumerate(self._sources(p, background))))

    async def once(self) -> GpuSnapshot | None:
        p = self.manager.placement()
        if p is None:
            return await self._unplaced()
        got = await asyncio.gather(*(s.once() for s in self._sources(p, lambda: False)), return_exceptions=True)
        parts: list[GpuSnapshot | None] = [g if isinstance(g, GpuSnapshot) else
                                           GpuSnapshot(at=time.time(), error=f"{type(g).__name__}: {g}")
                                           for g in got]
        return merge(p.nodes, parts)


async def reach(transport: Transport, endpoint: str) -> str:
    """The URL that reaches `endpoint` (as the transport's host reaches it): a port forward on the SSH connection
    where the transport forwards, else the endpoint itself."""
    u = urlsplit(endpoint)
    if not isinstance(transport, Forwarding) or not u.hostname:
        return endpoint
    local = await transport.forward(u.hostname, u.port or (443 if u.scheme == "https" else 80))
    return f"{u.scheme}://127.0.0.1:{local}{u.path}"


async def placed_endpoint(manager: Placed) -> str | None:
    """The placed run's endpoint now (one reading of the run when none was made yet); None while it is not placed."""
    p = manager.placement()
    if p is None:
        with contextlib.suppress(TransportError, ManagerError, OSError):
            await manager.state()
        p = manager.placement()
    return p.endpoint if p is not None else None


async def follow_endpoint(manager: Placed, current: Callable[[], str],
                          use: Callable[[str], Awaitable[None]]) -> None:
    """Hands `use` each placed run's endpoint as it changes from `current()` (a new run, a restart that landed on
    another node), as the manager's readings of the run find it."""
    while True:
        p = manager.placement()
        if p is not None and p.endpoint != current():
            await use(p.endpoint)
        await sleep_on_grid(1.0)
