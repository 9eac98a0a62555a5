"""The wait between stop and start: until the old run's GPU memory is released, proven by fresh readings.

No fixed sleep: a `sleep 8` was not enough for a 548 GB model, and every config of a sweep died of CUDA OOM
because the old process still held its memory. Readings that stop (a dropped link) are no proof of release.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from tui.lifecycle.release import release_status
from tui.model import GpuSnapshot, Step
from tui.ops.engine_view import EngineView
from tui.ops.errors import RestartError
from tui.ops.guard import LockGuard
from tui.transport import TransportError


async def wait_for_release(engine: EngineView, old_pids: set[int], on_step: Callable[[Step], None],
                           timeout: float, baseline: dict[int, float] | None = None,
                           guard: LockGuard | None = None) -> GpuSnapshot | None:
    """Poll until the old run's memory is released; returns the snapshot that showed it (the new baseline)."""
    gpus = engine.deployment_gpus()
    deadline = time.monotonic() + timeout
    shown = ""
    t0 = time.monotonic()
    seen_gpus = engine.gpus is not None and bool(engine.gpus.gpus)
    while True:
        if guard is not None:
            await guard.check(every=2.0)
        try:  # a fresh query each poll: stream samples and process lists lag
            snap: GpuSnapshot | None = await engine.fresh_gpus(max_age=0)
        except (TransportError, OSError) as e:
            snap = GpuSnapshot(at=time.time(), error=str(e))
        if snap is None or snap.error or not snap.gpus:
            why = snap.error if snap is not None and snap.error else "no GPU telemetry"
            if not seen_gpus:  # this host has no GPU telemetry: nothing to wait for
                on_step(Step("release", "skipped", f"cannot verify GPU memory release: {why}"))
                return None
            # telemetry that worked and is gone for a moment (a dropped link) is no proof of release: wait on
            if time.monotonic() > deadline:
                on_step(Step("release", "failed", f"GPU memory release not verified in {timeout:g} s: {why}"))
                raise RestartError(f"GPU memory release could not be verified within {timeout:g} s ({why}); "
                                   "not starting, to avoid a CUDA OOM")
            if shown != why:
                on_step(Step("release", "running", f"GPU readings lost ({why}); waiting for them"))
                shown = why
            await asyncio.sleep(0.5)
            continue
        seen_gpus = True
        st = release_status(snap, gpus or [g.index for g in snap.gpus], old_pids,
                            baseline if baseline is not None else engine.baseline_mib,
                            engine.dep.release_tolerance_mib)
        if st.released:
            engine.previous_pids = set()  # released: no panel may still say the previous run holds memory
        # the panels show the very sample the step is about: a step and a panel never give two figures
        engine.observe_gpus(snap)
        if st.released:
            on_step(Step("release", "done", f"GPU memory released after {time.monotonic() - t0:.1f} s"))
            return snap
        desc = f"waiting for GPU memory: {st.describe()}"
        if desc != shown:
            on_step(Step("release", "running", desc))
            shown = desc
        if time.monotonic() > deadline:
            on_step(Step("release", "failed", f"not released after {timeout:g} s: {st.describe()}"))
            raise RestartError(f"GPU memory was not released within {timeout:g} s ({st.describe()}); "
                               "not starting, to avoid a CUDA OOM")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def stop_progress(engine: EngineView, old: set[int], on_step: Callable[[Step], None],
                        every: float = 1.0) -> AsyncIterator[None]:
    """While a stop is under way, what the old run still holds, once a second from fresh GPU readings ("stopping:
    30.0 GiB held on GPU 3 by PID 5127"): a tree whose ranks leave one by one takes a while to stop (the manager
    waits for every process), and which rank is the straggler is the thing to know then."""
    async def watch() -> None:
        shown = ""
        gpus = engine.deployment_gpus()
        while True:
            await asyncio.sleep(every)
            try:
                snap = await engine.fresh_gpus(max_age=every)
            except (TransportError, OSError):
                continue
            if snap is None or snap.error or not snap.gpus:
                continue
            st = release_status(snap, gpus or [g.index for g in snap.gpus], old, engine.baseline_mib,
                                engine.dep.release_tolerance_mib)
            engine.observe_gpus(snap)
            desc = "" if st.released else f"stopping: {st.describe()}"
            if desc and desc != shown:
                on_step(Step("stop", "running", desc))
                shown = desc
    task = asyncio.create_task(watch(), name="bringup-stop-progress")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def old_pids(engine: EngineView) -> set[int]:
    """The running server's processes, taken before it is stopped: the release wait waits for these to leave."""
    pids: set[int] = set()
    unit = engine.state.unit
    if unit is not None and unit.main_pid:
        pids.add(unit.main_pid)
    pids |= engine.run_pids or set()
    snap = engine.gpus
    if snap is not None and unit is not None and unit.running:
        gpus = set(engine.deployment_gpus())
        pids.update(p.pid for p in snap.processes if p.gpu_index in gpus)
    return pids
