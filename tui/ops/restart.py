"""The safe restart protocol, for any manager: lock, write flags, stop, wait for the GPU memory of the old run
to be released, start, and follow the new invocation until the reducer says ready or failed.

Each step reports its progress through `on_step`, so the console and the CLI show the same thing. There is no
fixed sleep anywhere: a `sleep 8` was not enough for a 548 GB model, and every config of a sweep died
of CUDA OOM because the old process still held its memory.

It drives the engine through `EngineView` (engine_view.py), never its class; the lock's guard and the account of
what was done are in guard.py, the release wait in release_wait.py, following the new run in follow_run.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tui.errors import PermanentError
from tui.lifecycle.flags import diff
from tui.managers import AsyncLock, LockHeld, LockInfo, ManagerError, Report
from tui.model import Outcome, Phase, Result, Step, StepStatus
from tui.ops import config_drift, evidence
from tui.ops.change import ChangePlan
from tui.ops.engine_view import EngineView
from tui.ops.errors import HeldByOthers, LockLost, ReleaseUnverified, RestartError, Superseded
from tui.ops.follow_run import follow_new, new_invocation, superseded
from tui.ops.guard import LockGuard, Progress
from tui.ops.release_wait import no_room_beside_others, old_pids, stop_progress, wait_for_release
from tui.transport import TransportError

__all__ = ["ChangePlan", "EngineView", "HeldLock", "LockLost", "Outcome", "Progress", "ReleaseUnverified",
           "RestartError", "Result", "Step", "StepStatus", "Superseded", "old_pids", "run", "stop",
           "wait_for_release"]


def _reporting(step: Callable[[Step], None]) -> Report:
    """What a manager tells during a step, as a line of that step: a manager of several nodes each node's part
    (`gpu-b: stopped in 1.2 s`), a container manager its pulls and what a recreate cannot carry."""
    return lambda name, detail: step(Step(name, StepStatus.RUNNING, detail))


def _guard(engine: EngineView, lock: AsyncLock, step: Callable[[Step], None], progress: Progress,
           info: LockInfo) -> LockGuard:
    """The guard reads the flags and the unit the way the engine does (a reading it takes is applied like any
    other), and nothing else of the engine."""
    return LockGuard(lock, step, progress, info, read_argv=lambda: engine.manager.read_argv(),
                     poll_unit=lambda: engine.poll_unit())


def _stepper(on_step: Callable[[Step], None]) -> tuple[list[Step], Callable[[Step], None]]:
    steps: list[Step] = []

    def step(s: Step) -> None:
        steps.append(s)
        on_step(s)
    return steps, step


@dataclass
class HeldLock:
    """A lock a longer job (a sweep) already holds, for its restarts to run under: no other bringup can restart the
    deployment between two of them. `info` follows a retake (a dropped SSH link); `note_prefix` starts each step
    written into the lock's record ("sweep 2/4 graphs-off: ")."""

    lock: AsyncLock
    info: LockInfo
    note_prefix: str = ""


#: what `run` restarts with: a plan (flags computed, and perhaps confirmed, from the flags it names as `old`), the
#: flags to run with whatever the flags are now (a sweep's configuration, the demo's command), or None: the flags
#: as they are
Target = ChangePlan | Sequence[str] | None


def _failed_or_refused(e: Exception) -> Result:
    """A manager's or transport's error: refused when trying again as it is will not help (an unknown host key, a
    unit not found), failed otherwise."""
    return Result.REFUSED if isinstance(e, PermanentError) else Result.FAILED


async def run(engine: EngineView, target: Target, on_step: Callable[[Step], None], *,
              wait_ready: bool = True, stop_first: bool = True, purpose: str = "restart",
              rollback: bool | None = None, held: HeldLock | None = None,
              ready_timeout_s: float | None = None, without_gpu_evidence: bool = False) -> Outcome:
    """Restart (or start) the deployment with `target`'s flags: one transaction under the deployment's lock, from
    the first step until ready, failed or the timeout (`ready_timeout_s`, else the deployment's), a rollback
    included. The flags are read once, under the lock. Cancelled (Ctrl-C), it says in its last step what it left
    behind, and the lock and its record are released. With `held`, it runs under that lock (taken and released by
    the caller) instead of taking its own.

    A host that gives no GPU readings is refused under the lock before anything is touched (REFUSED: the server as
    it was, the flags unwritten), unless `without_gpu_evidence` (the operator's override) or the deployment's
    unverified_release_grace_s accepts going on without them (tui/ops/evidence.py)."""
    steps, step = _stepper(on_step)
    mgr = engine.manager
    if not mgr.can_control:
        raise RestartError(f"{engine.name} is observe-only: bringup cannot restart it")
    progress = Progress(engine.name)
    timeout = engine.dep.ready_timeout_s if ready_timeout_s is None else ready_timeout_s

    async def locked(lock: AsyncLock, info: LockInfo, prefix: str = "") -> Outcome:
        guard = _guard(engine, lock, step, progress, info)
        guard.note_prefix = prefix
        try:
            return await _locked_run(engine, target, step, guard, steps, wait_ready=wait_ready,
                                     stop_first=stop_first, rollback=rollback, ready_timeout_s=timeout,
                                     without_gpu_evidence=without_gpu_evidence, purpose=purpose)
        finally:
            await guard.done()
            if held is not None:
                held.info = guard.info
    try:
        if held is not None:
            since = time.strftime("%H:%M:%S", time.localtime(held.info.since))
            step(Step("lock", StepStatus.DONE, f"under the lock held since {since} ({held.info.who}, pid "
                      f"{held.info.pid}, {held.info.purpose})"))
            return await locked(held.lock, held.info, held.note_prefix)
        # the lock's record says the change a plan makes; flags given bare are compared with nothing before the
        # lock is held (their change is in the steps)
        lock = mgr.lock(f"{purpose} {engine.name}", target.change if isinstance(target, ChangePlan) else "")
        async with lock as info:
            step(Step("lock", StepStatus.DONE, f"lock taken ({info.who}, pid {info.pid})"))
            return await locked(lock, info)
    except LockHeld as e:
        step(Step("lock", StepStatus.FAILED, str(e)))
        return Outcome(Result.LOCK_HELD, engine.state.phase, str(e), steps=tuple(steps))
    except (LockLost, Superseded) as e:
        return Outcome(Result.SUPERSEDED, engine.state.phase, str(e), invocation=progress.started, steps=tuple(steps))
    except ReleaseUnverified as e:  # no GPU readings for the whole wait: the start refused after it (exit 3)
        return Outcome(Result.UNVERIFIED, engine.state.phase, f"{e}; left: {progress.left_in()}", steps=tuple(steps),
                       invocation=progress.started)
    except HeldByOthers as e:  # another deployment's or user's memory leaves no room: refused, not waited for
        return Outcome(Result.REFUSED, engine.state.phase, f"{e}; left: {progress.left_in()}", steps=tuple(steps),
                       invocation=progress.started)
    except RestartError as e:  # GPU memory not released, or the new run never appeared, in time
        return Outcome(Result.TIMED_OUT, engine.state.phase, f"{e}; left: {progress.left_in()}", steps=tuple(steps),
                       invocation=progress.started)
    except (ManagerError, TransportError) as e:
        step(Step("error", StepStatus.FAILED, str(e)))
        return Outcome(_failed_or_refused(e), engine.state.phase, f"{e}; left: {progress.left_in()}",
                       steps=tuple(steps), invocation=progress.started)
    except asyncio.CancelledError:
        step(Step("interrupted", StepStatus.FAILED, progress.left_in()))
        raise


async def _locked_run(engine: EngineView, target: Target, step: Callable[[Step], None], guard: LockGuard,
                      steps: list[Step], *, wait_ready: bool, stop_first: bool, rollback: bool | None,
                      ready_timeout_s: float, without_gpu_evidence: bool = False, purpose: str = "restart") -> Outcome:
    """What `run` does once it holds the lock: read the flags (the one reading the transaction goes by), refuse a
    plan computed from other flags, run the transaction, and roll back when it failed and a rollback is asked."""
    mgr = engine.manager
    step = guard.noting(step)
    old = await mgr.read_argv()
    if isinstance(target, ChangePlan):
        if old != list(target.old):
            # the change was computed (and confirmed) from other flags than there are now: someone changed them
            # since, and writing ours would silently undo theirs
            step(Step("flags", StepStatus.FAILED, "the flags changed since this was confirmed: nothing done"))
            return Outcome(Result.REFUSED, engine.state.phase, "not done: the flags changed since it was confirmed "
                           "(another operator?); look at them again", steps=tuple(steps))
        new, changes = list(target.new), list(target.changes)
    else:
        new = old if target is None else list(target)
        changes = diff(old, new, engine.flag_specs)
    # no evidence, no change: a release wait with no GPU readings to go on would stop the server and then refuse
    # to start it, so it is refused here, before the flags are written or anything is stopped
    blind = await evidence.no_evidence(engine)
    if blind is not None:
        how = evidence.accepted_by(engine.dep, without_gpu_evidence)
        if not how:
            message = evidence.refusal(blind, purpose)
            step(Step("evidence", StepStatus.FAILED, message))
            return Outcome(Result.REFUSED, engine.state.phase, message, steps=tuple(steps))
        step(Step("evidence", StepStatus.SKIPPED, evidence.going_on(blind, how)))
        engine.action(f"{purpose} {evidence.ACTION} ({how})")  # into the run history's actions
    # memory another deployment or user holds is not this one's to wait for: a start that cannot fit beside it is
    # refused here, naming the holder, before the flags are written or anything is stopped
    crowded = await no_room_beside_others(engine, new, old_pids(engine))
    if crowded is not None:
        step(Step("memory", StepStatus.FAILED, crowded))
        return Outcome(Result.REFUSED, engine.state.phase, crowded, steps=tuple(steps))
    out = await _transaction(engine, old, new, changes, step, guard, wait_ready=wait_ready, stop_first=stop_first,
                             ready_timeout_s=ready_timeout_s, without_evidence=without_gpu_evidence)
    do_rollback = engine.dep.auto_rollback if rollback is None else rollback
    good = None
    if out.result is Result.FAILED and do_rollback and wait_ready:
        with contextlib.suppress(TransportError, ManagerError):
            good = await mgr.read_saved_argv("ready")
    # a rollback only after our run failed: not after a timeout (the run may still come up), nor after a refusal
    # (no readings of the GPUs, a command that cannot be run): the flags did not fail, and another start would
    # meet the same refusal
    if out.result is not Result.FAILED or good is None or list(good) == list(guard.argv):
        return replace(out, steps=tuple(steps))
    step(Step("rollback", StepStatus.RUNNING, "rolling back to the last flags that reached ready"))
    failed = list(guard.argv)  # the flags the failed run was started with, as this transaction wrote them
    back = await _transaction(engine, failed, list(good), diff(failed, list(good), engine.flag_specs), step, guard,
                              wait_ready=True, stop_first=True, ready_timeout_s=ready_timeout_s,
                              without_evidence=without_gpu_evidence)
    return Outcome(Result.ROLLED_BACK, back.phase, f"{out.message}; rolled back: {back.message}", failure=out.failure,
                   invocation=back.invocation, steps=tuple(steps))


async def _transaction(engine: EngineView, old_argv: list[str], argv: list[str], changes: Sequence[str],
                       step: Callable[[Step], None], guard: LockGuard, *, wait_ready: bool, stop_first: bool,
                       ready_timeout_s: float, without_evidence: bool = False) -> Outcome:
    """flags, stop, release, start, follow: every step on a lock proven still ours. `old_argv`: the flags as read
    under the lock; `changes`: the change from them to `argv`, in words ([] for none)."""
    mgr = engine.manager
    report = _reporting(step)
    progress = guard.progress
    progress.started, progress.ready = "", False
    guard.argv = old_argv
    unit = await engine.poll_unit()
    guard.saw(unit)
    progress.was_running = unit.running or unit.lingering
    if changes:
        await guard.check()
        await guard.act("flags", lambda: mgr.write_argv(argv, report), also_argv=[argv])
        progress.flags = "; ".join(changes)
        step(Step("flags", StepStatus.DONE, "flags written: " + progress.flags))
    else:
        step(Step("flags", StepStatus.SKIPPED, "flags unchanged"))
    await _record_base(engine)
    guard.argv = argv
    old_inv = unit.invocation
    if (unit.running or unit.lingering) and stop_first:
        await _read_gpus_now(engine)
        pids = old_pids(engine)
        await guard.check()
        step(Step("stop", StepStatus.RUNNING, f"stopping {mgr.target}{_pid(unit.main_pid)}"))
        engine.action("stop")
        t0 = time.monotonic()
        progress.asked = "stop"
        async with stop_progress(engine, pids, step):
            await guard.act("stop", lambda: mgr.stop(report), also_runs=[(old_inv, False)])
        progress.stopped = True
        guard.saw(await engine.poll_unit())
        step(Step("stop", StepStatus.DONE, f"stopped in {time.monotonic() - t0:.1f} s"))
    else:
        pids = {unit.main_pid} if unit.main_pid else set()
        step(Step("stop", StepStatus.SKIPPED, "was not running"))
    snap = await wait_for_release(engine, pids, step, engine.dep.release_timeout_s, guard=guard, purpose="start",
                                  without_evidence=without_evidence, argv=argv)
    if snap is not None and snap.gpus:
        engine.save_baseline(snap)
    await guard.check()  # the step that must never run twice at once: two starts into the same GPUs
    step(Step("start", StepStatus.RUNNING, "starting " + " ".join(argv[:3]) + (" ..." if len(argv) > 3 else "")))
    engine.action("start")

    asked = False

    async def start() -> None:
        nonlocal asked
        now = await engine.poll_unit()
        if now.invocation not in ("", old_inv):
            if not asked:  # someone started it meanwhile, outside the lock: not ours to follow
                raise await superseded(now, now, guard)
            return  # an attempt lost with the link went through
        asked = True
        progress.asked = "start"
        await mgr.start(argv, report)
    try:
        await guard.act("start", start, also_runs=[(old_inv, False)], also_new_run=True)
    except ManagerError as e:  # the manager says no process began (a command that cannot be run): never "started"
        if isinstance(e, LockHeld):
            raise
        progress.asked = ""  # answered: nothing is under way
        step(Step("start", StepStatus.FAILED, str(e)))
        return Outcome(_failed_or_refused(e), engine.state.phase, f"not started: {e}; left: {progress.left_in()}")
    ours = await new_invocation(engine, old_inv)
    progress.started = ours.invocation
    guard.saw(ours)
    if ours.main_pid:
        step(Step("start", StepStatus.DONE, f"started: pid {ours.main_pid}, invocation {ours.invocation[:12]}"))
    elif ours.running:  # a run with no server process yet (systemd's ExecStartPre): not "started: pid 0"
        step(Step("start", StepStatus.DONE, f"run {ours.invocation[:12]} begun; its server process is not up yet"))
    else:
        ended = f"the new run {ours.invocation[:12]} ended before a server process of it was seen" + \
            (f" (exit status {ours.exit_status})" if ours.exit_status is not None else "")
        step(Step("start", StepStatus.FAILED, ended))
        if not wait_ready:
            return Outcome(Result.FAILED, engine.state.phase, ended, invocation=ours.invocation)
    if not wait_ready:
        return Outcome(Result.DONE, engine.state.phase, "started", invocation=ours.invocation)
    try:
        phase, failure = await follow_new(engine, ours, ready_timeout_s, step, guard)
    except (LockLost, Superseded) as e:
        step(Step("follow", StepStatus.FAILED, str(e)))
        raise
    except RestartError as e:
        step(Step("follow", StepStatus.FAILED, str(e)))
        return Outcome(Result.TIMED_OUT, engine.state.phase, str(e), invocation=ours.invocation)
    if phase == Phase.READY:
        progress.ready = True
        try:  # a blip here must not turn a ready run into a failed restart (a sweep would file it so)
            await mgr.save_argv("ready", argv)
        except (TransportError, ManagerError) as e:
            step(Step("follow", StepStatus.RUNNING,
                      f"ready; the flags could not be recorded as the last good ones: {e}"))
        step(Step("follow", StepStatus.DONE, "ready: a generation from the new process succeeded"))
        return Outcome(Result.DONE, phase, "ready", invocation=ours.invocation)
    msg = f"failed in {failure.phase}: {failure.kind}" if failure else "failed"
    step(Step("follow", StepStatus.FAILED, msg))
    return Outcome(Result.FAILED, phase, msg, failure=failure, invocation=ours.invocation)


async def _record_base(engine: EngineView) -> None:
    """The config's command the flags now written go with (config_drift.py): a later edit of the config is told
    from them by it. Written only when it changed."""
    config = engine.dep.configured_command
    if config is not None and await engine.manager.read_saved_argv(config_drift.BASE) != config:
        await engine.manager.save_argv(config_drift.BASE, config)


async def stop(engine: EngineView, on_step: Callable[[Step], None]) -> Outcome:
    """Stop under the lock, then wait until the GPU memory is released: stopped means a start may follow at once
    (the seeds' `stop; sleep 8; start` started into the old run's memory)."""
    steps, step = _stepper(on_step)
    progress = Progress(engine.name)
    try:
        lock = engine.manager.lock(f"stop {engine.name}")
        async with lock as info:
            step(Step("lock", StepStatus.DONE, f"lock taken ({info.who}, pid {info.pid})"))
            guard = _guard(engine, lock, step, progress, info)
            try:
                return await _locked_stop(engine, guard.noting(step), guard, steps)
            finally:
                await guard.done()
    except LockHeld as e:
        step(Step("lock", StepStatus.FAILED, str(e)))
        return Outcome(Result.LOCK_HELD, engine.state.phase, str(e), steps=tuple(steps))
    except LockLost as e:
        return Outcome(Result.SUPERSEDED, engine.state.phase, str(e), steps=tuple(steps))
    except ReleaseUnverified as e:  # stopped, but no GPU readings say its memory is free: not "stopped" (exit 3)
        return Outcome(Result.UNVERIFIED, Phase.STOPPED, f"stopped, but {e}", steps=tuple(steps))
    except RestartError as e:
        return Outcome(Result.TIMED_OUT, Phase.STOPPED, f"stopped, but {e}", steps=tuple(steps))
    except (ManagerError, TransportError) as e:
        step(Step("error", StepStatus.FAILED, str(e)))
        return Outcome(_failed_or_refused(e), engine.state.phase, f"{e}; left: {progress.left_in()}",
                       steps=tuple(steps))
    except asyncio.CancelledError:
        step(Step("interrupted", StepStatus.FAILED, progress.left_in()))
        raise


async def _read_gpus_now(engine: EngineView) -> None:
    """A GPU reading as the stop is asked for: the record's stop row (and the PIDs the release waits on) is what
    was held then, not the first sample after the stop, 0 once it is done (issue 51)."""
    snap = await engine.fresh_gpus()
    if snap is not None:
        engine.observe_gpus(snap)


async def _locked_stop(engine: EngineView, step: Callable[[Step], None], guard: LockGuard,
                       steps: list[Step]) -> Outcome:
    progress = guard.progress
    guard.argv = await engine.manager.read_argv()
    unit = await engine.poll_unit()
    guard.saw(unit)
    # a stop already under way (deactivating: by hand, or one interrupted) is waited for like ours
    if not unit.running and not unit.lingering and unit.active != "deactivating":
        step(Step("stop", StepStatus.SKIPPED, "was not running"))
        return Outcome(Result.DONE, Phase.STOPPED, "not running", steps=tuple(steps))
    await _read_gpus_now(engine)
    pids = old_pids(engine)
    step(Step("stop", StepStatus.RUNNING, f"stopping {engine.manager.target}{_pid(unit.main_pid)}"))
    engine.action("stop")
    t0 = time.monotonic()
    progress.asked = "stop"
    async with stop_progress(engine, pids, step):
        await guard.act("stop", lambda: engine.manager.stop(_reporting(step)), also_runs=[(unit.invocation, False)])
    progress.stopped = True
    took = time.monotonic() - t0
    guard.saw(await engine.poll_unit())
    step(Step("stop", StepStatus.DONE, f"stopped in {took:.1f} s"))
    await wait_for_release(engine, pids, step, engine.dep.release_timeout_s, guard=guard, purpose="stop")
    return Outcome(Result.DONE, Phase.STOPPED, f"stopped in {took:.1f} s; {steps[-1].detail}", steps=tuple(steps),
                   stop_s=round(took, 1))


def _pid(pid: int | None) -> str:
    """The run's main process, where it has one of bringup's knowing (a Slurm job's is on its nodes: none here)."""
    return f" (pid {pid})" if pid else ""
