"""One host's GPU stream (tui/engine/host_gpus.py) over the simulated `nvidia-smi`, real processes: the processes on
its GPUs read every 2 s while a deployment on it is open, every 10 s while all are in the fleet's background, and at
once when memory moves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.simdeploy import sim_host
from tests.helpers.wait import until_async
from tui.model import (
    GpuSnapshot,
)


async def test_a_hosts_gpu_processes_are_read_less_often_while_none_of_its_deployments_is_open(
        tmp_path: Path) -> None:
    """One host's stream (the simulated `nvidia-smi`, real processes): the processes on its GPUs, a command of their
    own, every 2 s while a deployment on it is open, every 10 s while all are in the fleet's background."""
    import asyncio

    from tui.collectors.gpu_smi import QUIET_APPS_S
    from tui.engine.gpu_sampler import GpuSampler
    from tui.engine.host_gpus import HostGpuStream
    from tui.transport import CommandResult
    from tui.transport.local import LocalTransport

    class Counting(LocalTransport):
        apps = 0

        async def run(self, argv: Any, **kw: Any) -> CommandResult:
            if any(a.startswith("--query-compute-apps") for a in argv):
                Counting.apps += 1
            return await super().run(argv, **kw)

    async def queries(backgrounds: list[bool], seconds: float) -> int:
        Counting.apps = 0
        stream = HostGpuStream(GpuSampler(sim_host(tmp_path), Counting()))
        got: list[object] = []
        followers = [asyncio.create_task(stream.follow(got.append, lambda bg=bg: bg)) for bg in backgrounds]
        await asyncio.sleep(seconds)
        assert got, "no sample"
        assert stream.quiet() is all(backgrounds)
        for f in followers:
            f.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        await stream.close()
        return Counting.apps

    assert QUIET_APPS_S > 5
    assert await queries([True, False], 5.0) >= 2  # one open: every 2 s
    assert await queries([True, True], 5.0) == 1  # none open: the first sample's, then not for 10 s


async def test_a_quiet_hosts_gpu_processes_are_read_again_as_soon_as_memory_moves(tmp_path: Path) -> None:
    """Every deployment in the background (the exporter's case): a run that loads its weights is named as the
    holder of that memory within seconds, not after the quiet 10 s."""
    import asyncio
    import time

    from tui.collectors.gpu_smi import QUIET_APPS_S
    from tui.engine.gpu_sampler import GpuSampler
    from tui.engine.host_gpus import HostGpuStream
    from tui.sim.gpus import Holder
    from tui.transport.local import LocalTransport

    state = tmp_path / "sim-state"
    stream = HostGpuStream(GpuSampler(sim_host(state), LocalTransport()))
    got: list[GpuSnapshot] = []
    follower = asyncio.create_task(stream.follow(got.append, lambda: True))
    try:
        await until_async("the first sample (processes read with it)", lambda: got, 30)
        assert stream.quiet()
        holder = Holder(str(state), [0, 1], release_delay=1.0)
        holder.update({0: 40_000, 1: 40_000})  # this process now holds 2 x 39 GiB
        moved = time.monotonic()
        deadline = moved + QUIET_APPS_S
        while time.monotonic() < deadline and not any(p.pid == holder.pid for p in got[-1].processes):
            await asyncio.sleep(0.05)
        took = time.monotonic() - moved
        assert any(p.pid == holder.pid for p in got[-1].processes), "the new holder is not named"
        assert took < QUIET_APPS_S / 2, took
        holder.mark_exited()
    finally:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        await stream.close()
