"""The safe restart protocol, for any manager: lock, write flags, stop, wait for the GPU memory of the old run
to be released, start, and follow the new invocation until the reducer says ready or failed.

Each step reports its progress through `on_step`, so the console and the CLI show the same thing. There is no
fixed sleep anywhere: a `sleep 8` was not enough for a 548 GB model, and every config of a sweep died
of CUDA OOM because the old process still held its memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tui.engine import Watch
from tui.managers import LockHeld, ManagerError
from tui.model import Failure, GpuSnapshot, Phase
from tui.ops.flags import diff
from tui.ops.release import release_status
from tui.transport import TransportError


@dataclass(frozen=True, slots=True)
class Step:
    name: str  # lock | flags | stop | release | start | follow | rollback
    status: str  # running | done | failed | skipped
    detail: str = ""
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    phase: Phase
    message: str
    failure: Failure | None = None
    invocation: str = ""
    steps: tuple[Step, ...] = ()
    rolled_back: bool = False
    #: not attempted (the lock is held) or ran out of time: scripts see exit code 2, like `wait`'s timeout
    refused: bool = False
    timed_out: bool = False


class RestartError(Exception):
    pass


async def wait_for_release(watch: Watch, old_pids: set[int], on_step: Callable[[Step], None],
                           timeout: float, baseline: dict[int, float] | None = None) -> GpuSnapshot | None:
    """Poll until the old run's memory is released; returns the snapshot that showed it (the new baseline)."""
    gpus = watch.deployment_gpus()
    deadline = time.monotonic() + timeout
    shown = ""
    t0 = time.monotonic()
    while True:
        snap = await watch.fresh_gpus(max_age=0)  # a fresh query each poll: stream samples and process lists lag
        if snap is None or snap.error or not snap.gpus:
            why = snap.error if snap is not None and snap.error else "no GPU telemetry"
            on_step(Step("release", "skipped", f"cannot verify GPU memory release: {why}"))
            return None
        st = release_status(snap, gpus or [g.index for g in snap.gpus], old_pids,
                            baseline if baseline is not None else watch.baseline_mib,
                            watch.dep.release_tolerance_mib)
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


async def follow_new(watch: Watch, old_invocation: str, timeout: float,
                     on_step: Callable[[Step], None]) -> tuple[Phase, Failure | None]:
    """Follow the new invocation only, until the reducer says ready or failed."""
    deadline = time.monotonic() + timeout
    last = None
    said = ""
    stalled = False
    while time.monotonic() < deadline:
        s = watch.state
        if s.invocation and s.invocation != old_invocation:
            if s.phase != last:
                on_step(Step("follow", "running", str(s.phase)))
                last = s.phase
            mismatch = watch.endpoint_mismatch()
            if mismatch and mismatch != said:
                on_step(Step("follow", "running", mismatch))
                said = mismatch
            stall = watch.stall_note()
            if stall and not stalled:
                on_step(Step("follow", "running", stall))
            stalled = bool(stall)
            if s.phase == Phase.READY:
                return s.phase, None
            if s.phase == Phase.FAILED:
                await watch.settle_failure()
                return s.phase, watch.state.failure
            if s.phase == Phase.STOPPED and s.unit is not None and not s.unit.running:
                return Phase.FAILED, s.failure
        await watch.wait_changed(0.5)
    why = watch.endpoint_mismatch()
    if watch.state.stalled_for is not None:
        why = "; ".join(x for x in (why, f"STALLED for {watch.state.stalled_for:.0f} s") if x)
    running = watch.state.unit is not None and watch.state.unit.running
    still = f"; the server is still running: `bringup stop {watch.name}` stops it" if running else ""
    raise RestartError(f"not ready within {timeout:g} s (last phase: {watch.state.phase})"
                       + (f"; {why}" if why else "") + still)


def old_pids(watch: Watch) -> set[int]:
    """The running server's processes, taken before it is stopped: the release wait waits for these to leave."""
    pids: set[int] = set()
    unit = watch.state.unit
    if unit is not None and unit.main_pid:
        pids.add(unit.main_pid)
    pids |= watch.run_pids or set()
    snap = watch.gpus
    if snap is not None and unit is not None and unit.running:
        gpus = set(watch.deployment_gpus())
        pids.update(p.pid for p in snap.processes if p.gpu_index in gpus)
    return pids


async def run(watch: Watch, new_argv: Sequence[str] | None, on_step: Callable[[Step], None], *,
              wait_ready: bool = True, stop_first: bool = True, purpose: str = "restart",
              rollback: bool | None = None) -> Outcome:
    """Restart (or start) the deployment with `new_argv` (None: keep the current flags)."""
    steps: list[Step] = []

    def step(s: Step) -> None:
        steps.append(s)
        on_step(s)

    mgr = watch.manager
    if not mgr.can_control:
        raise RestartError(f"{watch.name} is observe-only: bringup cannot restart it")
    try:
        lock = mgr.lock(f"{purpose} {watch.name}")
        async with lock as info:
            step(Step("lock", "done", f"lock taken ({info.who}, pid {info.pid})"))
            old_argv = await mgr.read_argv()
            argv = list(new_argv) if new_argv is not None else old_argv
            changes = diff(old_argv, argv, watch.flag_specs)
            if changes:
                await mgr.write_argv(argv)
                step(Step("flags", "done", "flags written: " + "; ".join(changes)))
            else:
                step(Step("flags", "skipped", "flags unchanged"))
            unit = await watch.poll_unit()
            old_inv = unit.invocation
            if unit.running and stop_first:
                pids = old_pids(watch)
                step(Step("stop", "running", f"stopping {mgr.target} (pid {unit.main_pid})"))
                watch.action("stop")
                t0 = time.monotonic()
                await mgr.stop()
                await watch.poll_unit()
                step(Step("stop", "done", f"stopped in {time.monotonic() - t0:.1f} s"))
            else:
                pids = {unit.main_pid} if unit.main_pid else set()
                step(Step("stop", "skipped", "was not running"))
            snap = await wait_for_release(watch, pids, step, watch.dep.release_timeout_s)
            if snap is not None and snap.gpus:
                watch.save_baseline(snap)
            step(Step("start", "running", "starting " + " ".join(argv[:3]) + (" ..." if len(argv) > 3 else "")))
            watch.action("start")
            await mgr.start(argv)
            unit = await watch.poll_unit()
            step(Step("start", "done", f"started: pid {unit.main_pid}, invocation {unit.invocation[:12]}"))
    except LockHeld as e:
        step(Step("lock", "failed", str(e)))
        return Outcome(False, watch.state.phase, str(e), steps=tuple(steps), refused=True)
    except RestartError as e:  # GPU memory not released in time: nothing was started
        return Outcome(False, watch.state.phase, str(e), steps=tuple(steps), timed_out=True)
    except (ManagerError, TransportError) as e:
        step(Step("start", "failed", str(e)))
        return Outcome(False, watch.state.phase, str(e), steps=tuple(steps))
    if not wait_ready:
        return Outcome(True, watch.state.phase, "started", invocation=unit.invocation, steps=tuple(steps))
    try:
        phase, failure = await follow_new(watch, old_inv, watch.dep.ready_timeout_s, step)
    except RestartError as e:
        step(Step("follow", "failed", str(e)))
        return Outcome(False, watch.state.phase, str(e), invocation=unit.invocation, steps=tuple(steps),
                       timed_out=True)
    if phase == Phase.READY:
        await mgr.save_argv("ready", argv)
        step(Step("follow", "done", "ready: a generation from the new process succeeded"))
        return Outcome(True, phase, "ready", invocation=unit.invocation, steps=tuple(steps))
    msg = f"failed in {failure.phase}: {failure.kind}" if failure else "failed"
    step(Step("follow", "failed", msg))
    do_rollback = watch.dep.auto_rollback if rollback is None else rollback
    if do_rollback:
        good = await mgr.read_saved_argv("ready")
        if good is not None and list(good) != list(argv):
            step(Step("rollback", "running", "rolling back to the last flags that reached ready"))
            out = await run(watch, good, on_step, wait_ready=True, purpose="rollback", rollback=False)
            return Outcome(False, out.phase, f"{msg}; rolled back: {out.message}", failure=failure,
                           invocation=out.invocation, steps=(*steps, *out.steps), rolled_back=True)
    return Outcome(False, phase, msg, failure=failure, invocation=unit.invocation, steps=tuple(steps))
