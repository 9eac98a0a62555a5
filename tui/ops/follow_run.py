"""The run a start began, followed until the reducer says ready or failed (the last step of a restart or start,
ops/restart.py), and only that run: another in its place is no result of ours. systemd restarting our ended run
(Restart=) is our failure; anything else is someone else's run, reported as `Superseded` with who took it over (the
lock's holder, or a start outside bringup's lock).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from tui.model import Failure, Phase, Step, StepStatus, Transition, UnitState
from tui.ops.engine_view import EngineView
from tui.ops.errors import RestartError, Superseded
from tui.ops.guard import LockGuard

#: how long a run that stopped with no failure of its own is watched for another run taking its place
LATE_START_S = 3.0


async def new_invocation(engine: EngineView, old: str, timeout: float = 30.0) -> UnitState:
    """The run our start began: the first invocation other than the old one (`systemctl start --no-block` returns
    before systemd has made it)."""
    deadline = time.monotonic() + timeout
    while True:
        unit = await engine.poll_unit()
        if unit.invocation and unit.invocation != old:
            return unit
        if time.monotonic() > deadline:
            raise RestartError(f"the start was asked for, but no new run appeared within {timeout:g} s")
        await asyncio.sleep(0.2)


async def superseded(ours: UnitState, unit: UnitState, guard: LockGuard | None) -> Superseded:
    holder = await guard.taken_over_by() if guard is not None else None
    if holder is not None:
        by = f"by {holder.describe()}"
    else:
        at = f" at {time.strftime('%H:%M:%S', time.localtime(unit.started_at))}" if unit.started_at else ""
        by = f"by a start outside bringup's lock (run {unit.invocation[:12]}{at})"
    return Superseded(f"superseded {by}: the run this {'restart' if ours.invocation else 'start'} began "
                      f"({ours.invocation[:12]}) was replaced; its result is not this command's")


async def follow_new(engine: EngineView, ours: UnitState, timeout: float, on_step: Callable[[Step], None],
                     guard: LockGuard | None = None) -> tuple[Phase, Failure | None]:
    """Follow the run this transaction started, and only it, until the reducer says ready or failed. Another run
    in its place is no result of ours: systemd restarting our ended run (Restart=) is our failure, anything else is
    someone else's run (Superseded).

    `timeout` counts from when the run leaves a scheduler's queue (Slurm's PENDING, phase QUEUED): an operator who
    waits for GPUs behind other jobs does not want the restart to time out in the queue, so a queued run waits as
    long as the scheduler keeps it there, unless the deployment sets `queue_timeout_s` (then that long at most)."""
    deadline = time.monotonic() + timeout
    queue_limit = engine.dep.queue_timeout
    queued_since: float | None = None
    last = None
    said = ""
    stalled = False
    while True:
        now = time.monotonic()
        s = engine.state
        if s.invocation == ours.invocation and s.phase == Phase.QUEUED:
            queued_since = now if queued_since is None else queued_since
            if queue_limit is not None and now - queued_since > queue_limit:
                raise RestartError(f"still queued after {queue_limit:g} s (the deployment's queue_timeout_s): "
                                   f"{_queued_words(s.timeline)}; the job waits on in the queue: `bringup stop "
                                   f"{engine.name}` cancels it")
            deadline = now + timeout  # the ready timeout begins when the run leaves the queue
        elif now >= deadline:
            break
        if guard is not None:
            await guard.check(every=2.0)
        s = engine.state
        unit = s.unit
        if unit is not None and unit.invocation and unit.invocation != ours.invocation:
            unit = await engine.poll_unit()  # never conclude from a reading that may predate our start
        if unit is not None and unit.invocation and unit.invocation != ours.invocation:
            if unit.n_restarts > ours.n_restarts:
                if s.failure is not None and s.invocation == ours.invocation:
                    return Phase.FAILED, s.failure
                return Phase.FAILED, None
            raise await superseded(ours, unit, guard)
        if s.invocation == ours.invocation:
            if s.phase != last:
                on_step(Step("follow", StepStatus.RUNNING, str(s.phase)))
                last = s.phase
            mismatch = engine.endpoint_mismatch()
            if mismatch and mismatch != said:
                on_step(Step("follow", StepStatus.RUNNING, mismatch))
                said = mismatch
            stall = engine.stall_note()
            if stall and not stalled:
                on_step(Step("follow", StepStatus.RUNNING, stall))
            stalled = bool(stall)
            if s.phase == Phase.READY:
                return s.phase, None
            if s.phase == Phase.FAILED:
                await engine.settle_failure()
                return s.phase, engine.state.failure
            if s.phase == Phase.STOPPED and s.unit is not None and not s.unit.running:
                if s.failure is None:
                    other = await _started_after(engine, ours)
                    if other is not None:
                        raise await superseded(ours, other, guard)
                return Phase.FAILED, s.failure
        await engine.wait_changed(0.5)
    why = engine.endpoint_mismatch()
    if engine.state.stalled_for is not None:
        why = "; ".join(x for x in (why, f"STALLED for {engine.state.stalled_for:.0f} s") if x)
    running = engine.state.unit is not None and engine.state.unit.running
    still = f"; the server is still running: `bringup stop {engine.name}` stops it" if running else ""
    raise RestartError(f"not ready within {timeout:g} s (last phase: {engine.state.phase})"
                       + (f"; {why}" if why else "") + still)


def _queued_words(timeline: Sequence[Transition]) -> str:
    """What the scheduler last said of the queued run (its reason), as the lifecycle panel shows it."""
    return next((t.line for t in reversed(timeline) if t.phase == Phase.QUEUED and t.line), "queued")


async def _started_after(engine: EngineView, ours: UnitState) -> UnitState | None:
    """The run that replaced ours, when ours stopped with no failure of its own. Such a run was stopped, often by
    hand to start another by hand; that start is seen a moment after the stop (a second `systemctl start`, a
    second command), so the unit is read again for up to `LATE_START_S` before the stop is called our failure."""
    deadline = time.monotonic() + LATE_START_S
    while True:
        unit = await engine.poll_unit()
        if unit is not None and unit.invocation and unit.invocation != ours.invocation:
            return None if unit.n_restarts > ours.n_restarts else unit  # Restart= ran ours again: our failure
        if time.monotonic() >= deadline:
            return None
        await engine.wait_changed(0.25)
