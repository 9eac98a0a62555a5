"""The GPUs of a deployment over several nodes as one stream: each node's host stream, merged into one snapshot
whose GPU indices and PIDs are keyed by node (lifecycle/nodes.py).

A node whose readings are missing or failing is named in the merged snapshot's error, and its GPUs are absent:
the release wait before a start then waits (readings that stopped are no proof of release) instead of taking
an unseen node's GPUs for free ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from tui.lifecycle.nodes import gpu_key, pid_key
from tui.model import GpuSnapshot

from .host_gpus import HostGpuStream

Deliver = Callable[[GpuSnapshot], None]


def merge(names: Sequence[str], parts: Sequence[GpuSnapshot | None]) -> GpuSnapshot:
    """One snapshot of every node's GPUs; `at` is the oldest node's reading (the merged one is no fresher)."""
    gpus, procs, errors, ats = [], [], [], []
    for i, (name, snap) in enumerate(zip(names, parts, strict=True)):
        if snap is None:
            errors.append(f"{name}: no GPU reading yet")
            continue
        ats.append(snap.at)
        if snap.error:
            errors.append(f"{name}: {snap.error}")
        gpus += [replace(g, index=gpu_key(i, g.index), host=name) for g in snap.gpus]
        procs += [replace(p, pid=pid_key(i, p.pid),
                          gpu_index=None if p.gpu_index is None else gpu_key(i, p.gpu_index)) for p in snap.processes]
    # one node whose GPU command cannot be run leaves the deployment without evidence for good
    return GpuSnapshot(at=min(ats) if ats else time.time(), gpus=tuple(gpus), processes=tuple(procs),
                       error="; ".join(errors), permanent=any(p is not None and p.permanent for p in parts))


class NodesGpuStream:
    """Follows every node's host stream (shared with other deployments on those hosts, in a fleet)."""

    def __init__(self, names: Sequence[str], streams: Sequence[HostGpuStream]) -> None:
        self.names = tuple(names)
        self.streams = list(streams)
        self.latest: GpuSnapshot | None = None
        self._parts: list[GpuSnapshot | None] = [None] * len(self.streams)

    async def follow(self, deliver: Deliver, background: Callable[[], bool] = lambda: False) -> None:
        def on(i: int, snap: GpuSnapshot) -> None:
            self._parts[i] = snap
            self.latest = merge(self.names, self._parts)
            deliver(self.latest)

        tasks = [asyncio.create_task(s.follow(functools.partial(on, i), background), name=f"bringup-node-gpus-{n}")
                 for i, (n, s) in enumerate(zip(self.names, self.streams, strict=True))]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def once(self) -> GpuSnapshot | None:
        """One fresh sample of every node at once (the release wait's)."""
        got = await asyncio.gather(*(s.once() for s in self.streams), return_exceptions=True)
        parts: list[GpuSnapshot | None] = []
        for g in got:
            if isinstance(g, BaseException):
                parts.append(GpuSnapshot(at=time.time(), error=f"{type(g).__name__}: {g}"))
            else:
                parts.append(g if g is not None else GpuSnapshot(at=time.time(), error="no GPU telemetry"))
        return merge(self.names, parts)

    async def close(self) -> None:
        for s in self.streams:
            await s.close()
