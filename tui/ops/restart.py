"""The safe restart protocol, for any manager: lock, write flags, stop, wait for the GPU memory of the old run
to be released, start, and follow the new invocation until the reducer says ready or failed.

Each step reports its progress through `on_step`, so the console and the CLI show the same thing. There is no
fixed sleep anywhere: a `sleep 8` was not enough for a 548 GB model, and every config of a sweep died
of CUDA OOM because the old process still held its memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from tui.engine import Watch
from tui.lifecycle.flags import diff
from tui.lifecycle.release import release_status
from tui.managers import AsyncLock, LockHeld, LockInfo, ManagerError
from tui.model import Failure, GpuSnapshot, Outcome, Phase, Step, UnitState
from tui.transport import TransportError

__all__ = ["LockLost", "Outcome", "Progress", "RestartError", "Step", "Superseded", "run", "stop"]


class RestartError(Exception):
    pass




class LockLost(RestartError):
    """The lock went (a dropped SSH connection frees it) and it could not be proven that nothing changed since."""


class Superseded(RestartError):
    """Another run than the one this restart started took the deployment over."""


@dataclass
class Progress:
    """What a transaction has done so far: what an interrupted or abandoned one says it left behind."""

    name: str
    flags: str = ""
    stopped: bool = False
    started: str = ""  # the invocation this transaction started
    ready: bool = False
    #: the action asked for last (stop, start): interrupted before it answered, it may be under way all the same
    asked: str = ""

    def left_in(self) -> str:
        done = [d for d in (f"flags written ({self.flags})" if self.flags else "",
                            "old run stopped" if self.stopped else "") if d]
        if self.asked == "start" and not self.started:
            rest = f"a start was asked for and may be under way: `bringup wait {self.name}` follows it"
        elif self.asked == "stop" and not self.stopped:
            rest = f"a stop was asked for and may be under way: `bringup status {self.name}` says"
        elif self.started:
            rest = (f"new run {self.started[:12]} started and ready" if self.ready else
                    f"new run {self.started[:12]} started, not yet ready: `bringup wait {self.name}` follows it")
        elif self.stopped:
            rest = f"new run NOT started: `bringup start {self.name}`"
        elif self.flags:
            rest = "the running server still has the old flags (they apply at its next start)"
        else:
            rest = "nothing changed"
        return ", ".join([*done, rest])


class _Guard:
    """The lock, kept honest through a whole transaction: before each step, and while it waits, the lock is checked
    on the host. A lost lock is taken again only when nothing changed meanwhile (same flags, same run); otherwise
    the transaction stops and says what state it left."""

    REGAIN_S = 60.0

    def __init__(self, watch: Watch, lock: AsyncLock, step: Callable[[Step], None], progress: Progress,
                 info: LockInfo) -> None:
        self.watch = watch
        self.lock = lock
        self.step = step
        self.progress = progress
        self.info = info
        self.argv: list[str] = []
        self.run: tuple[str, bool] = ("", False)  # (invocation, running) as this transaction last saw it
        self._checked = 0.0
        self._note = ""
        self._noting: asyncio.Task[None] | None = None
        #: while an action is retried: the states it may itself have brought about, before the link dropped
        self.also_runs: list[tuple[str, bool]] = []
        self.also_argv: list[list[str]] = []
        self.also_new_run = False

    def saw(self, unit: UnitState) -> None:
        self.run = (unit.invocation, unit.running)

    def noted(self, s: Step) -> None:
        """Each step into the lock's record, so that another console shows it as it happens; written in the
        background, newest first (a slow host never delays the restart for it)."""
        self._note = f"{s.name}: {s.detail}"
        if self._noting is None or self._noting.done():
            self._noting = asyncio.create_task(self._write_notes())

    async def done(self) -> None:
        """Before the lock goes: a note still being written must not rewrite the record after it is cleared."""
        if self._noting is not None and not self._noting.done():
            self._noting.cancel()
            await asyncio.gather(self._noting, return_exceptions=True)

    async def _write_notes(self) -> None:
        written = ""
        while self._note != written:
            written = self._note
            with contextlib.suppress(TransportError, ManagerError, OSError):
                await self.lock.note(written)

    async def check(self, every: float = 0.0) -> None:
        if every and time.monotonic() - self._checked < every:
            return
        deadline = time.monotonic() + self.REGAIN_S
        said = False
        while True:
            try:
                if not await self.lock.still_held():
                    await self._regain()
                self._checked = time.monotonic()
                return
            except (TransportError, ManagerError) as e:
                if getattr(e, "permanent", False) and not isinstance(e, LockHeld):
                    raise  # an unknown host key, a unit gone: said as such (exit 2), not as a lost lock
                if isinstance(e, LockHeld) or time.monotonic() > deadline:
                    self.step(Step("lock", "failed", f"lost the lock and could not take it back: {e}"))
                    raise LockLost(f"lost the lock ({e}); left: {self.progress.left_in()}") from None
                if not said:
                    self.step(Step("lock", "running", f"cannot check the lock: {e}; retrying"))
                    said = True
                await asyncio.sleep(1.0)

    async def _regain(self) -> None:
        argv = await self.watch.manager.read_argv()
        unit = await self.watch.poll_unit()
        now = (unit.invocation, unit.running)
        # once our run is started, it may end by itself meanwhile: the same invocation is the same run
        same_run = (now == self.run or now in self.also_runs
                    or bool(self.progress.started and now[0] == self.run[0])
                    # a start lost with the link may have gone through: a new run no other bringup holds the
                    # lock for is taken for ours (and followed as ours only if nothing else replaces it)
                    or (self.also_new_run and now[0] not in ("", self.run[0]) and await self.lock.holder() is None))
        if (argv != self.argv and argv not in self.also_argv) or not same_run:
            what = "the flags" if argv != self.argv else "the run"
            holder = await self.lock.holder()
            by = f" (by {holder.describe()})" if holder is not None else ""
            now_txt = (f"it now runs {unit.invocation[:12]} ({unit.active})" if unit.running
                       else f"it is now {unit.active}")
            self.step(Step("lock", "failed", f"lock lost, and {what} changed meanwhile{by}"))
            whose = "with other flags than this command wrote" if argv != self.argv else "not this command's run"
            raise LockLost(f"lost the lock and {what} changed meanwhile{by}: {now_txt}, {whose}; "
                           f"before that this command had: {self.progress.left_in()}")
        self.info = await self.lock.retake()
        self.step(Step("lock", "done", "lock lost (connection dropped?) and taken back: nothing changed meanwhile"))

    async def act(self, what: str, action: Callable[[], Awaitable[None]], *, also_runs: Sequence[tuple[str, bool]] = (),
                  also_argv: Sequence[list[str]] = (), also_new_run: bool = False) -> None:
        """One action (write flags, stop, start), carried on across a dropped connection: each is idempotent, so
        after the link is back and the lock proven ours again (the states the action itself may have brought
        about allowed), it is asked for again. A permanent error, or a third failure, ends the transaction."""
        for attempt in range(3):
            try:
                await action()
                break
            except TransportError as e:
                if getattr(e, "permanent", False) or attempt == 2:
                    raise
                self.step(Step(what, "running", f"connection lost during {what} ({e}); retrying once it is back"))
                self.also_runs, self.also_argv, self.also_new_run = list(also_runs), list(also_argv), also_new_run
                self._checked = 0.0
                try:
                    await self.check()
                finally:
                    self.also_runs, self.also_argv, self.also_new_run = [], [], False


async def wait_for_release(watch: Watch, old_pids: set[int], on_step: Callable[[Step], None],
                           timeout: float, baseline: dict[int, float] | None = None,
                           guard: _Guard | None = None) -> GpuSnapshot | None:
    """Poll until the old run's memory is released; returns the snapshot that showed it (the new baseline)."""
    gpus = watch.deployment_gpus()
    deadline = time.monotonic() + timeout
    shown = ""
    t0 = time.monotonic()
    seen_gpus = watch.gpus is not None and bool(watch.gpus.gpus)
    while True:
        if guard is not None:
            await guard.check(every=2.0)
        try:  # a fresh query each poll: stream samples and process lists lag
            snap: GpuSnapshot | None = await watch.fresh_gpus(max_age=0)
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
                            baseline if baseline is not None else watch.baseline_mib,
                            watch.dep.release_tolerance_mib)
        if st.released:
            watch.previous_pids = set()  # released: no panel may still say the previous run holds memory
        # the panels show the very sample the step is about: a step and a panel never give two figures
        watch.observe_gpus(snap)
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


async def _new_invocation(watch: Watch, old: str, timeout: float = 30.0) -> UnitState:
    """The run our start began: the first invocation other than the old one (`systemctl start --no-block` returns
    before systemd has made it)."""
    deadline = time.monotonic() + timeout
    while True:
        unit = await watch.poll_unit()
        if unit.invocation and unit.invocation != old:
            return unit
        if time.monotonic() > deadline:
            raise RestartError(f"the start was asked for, but no new run appeared within {timeout:g} s")
        await asyncio.sleep(0.2)


async def _superseded(watch: Watch, ours: UnitState, unit: UnitState, guard: _Guard | None) -> Superseded:
    holder = None
    if guard is not None:
        with contextlib.suppress(TransportError, ManagerError, OSError):
            holder = await guard.lock.holder()
    if holder is not None and guard is not None and holder.token != guard.info.token:
        by = f"by {holder.describe()}"
    else:
        at = f" at {time.strftime('%H:%M:%S', time.localtime(unit.started_at))}" if unit.started_at else ""
        by = f"by a start outside bringup's lock (run {unit.invocation[:12]}{at})"
    return Superseded(f"superseded {by}: the run this {'restart' if ours.invocation else 'start'} began "
                      f"({ours.invocation[:12]}) was replaced; its result is not this command's")


async def follow_new(watch: Watch, ours: UnitState, timeout: float, on_step: Callable[[Step], None],
                     guard: _Guard | None = None) -> tuple[Phase, Failure | None]:
    """Follow the run this transaction started, and only it, until the reducer says ready or failed. Another run
    in its place is no result of ours: systemd restarting our ended run (Restart=) is our failure, anything else is
    someone else's run (Superseded)."""
    deadline = time.monotonic() + timeout
    last = None
    said = ""
    stalled = False
    while time.monotonic() < deadline:
        if guard is not None:
            await guard.check(every=2.0)
        s = watch.state
        unit = s.unit
        if unit is not None and unit.invocation and unit.invocation != ours.invocation:
            unit = await watch.poll_unit()  # never conclude from a reading that may predate our start
        if unit is not None and unit.invocation and unit.invocation != ours.invocation:
            if unit.n_restarts > ours.n_restarts:
                if s.failure is not None and s.invocation == ours.invocation:
                    return Phase.FAILED, s.failure
                return Phase.FAILED, None
            raise await _superseded(watch, ours, unit, guard)
        if s.invocation == ours.invocation:
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


def _noting(step: Callable[[Step], None], guard: _Guard) -> Callable[[Step], None]:
    def both(s: Step) -> None:
        step(s)
        guard.noted(s)
    return both


def _stepper(on_step: Callable[[Step], None]) -> tuple[list[Step], Callable[[Step], None]]:
    steps: list[Step] = []

    def step(s: Step) -> None:
        steps.append(s)
        on_step(s)
    return steps, step


async def run(watch: Watch, new_argv: Sequence[str] | None, on_step: Callable[[Step], None], *,
              wait_ready: bool = True, stop_first: bool = True, purpose: str = "restart",
              rollback: bool | None = None, expect_argv: Sequence[str] | None = None) -> Outcome:
    """Restart (or start) the deployment with `new_argv` (None: keep the current flags): one transaction under the
    deployment's lock, from the first step until ready, failed or the timeout, a rollback included. Cancelled
    (Ctrl-C), it says in its last step what it left behind, and the lock and its record are released."""
    steps, step = _stepper(on_step)
    mgr = watch.manager
    if not mgr.can_control:
        raise RestartError(f"{watch.name} is observe-only: bringup cannot restart it")
    progress = Progress(watch.name)
    try:
        before = await mgr.read_argv()
        change = "; ".join(diff(before, list(new_argv), watch.flag_specs)) if new_argv is not None else ""
        lock = mgr.lock(f"{purpose} {watch.name}", change)
        async with lock as info:
            step(Step("lock", "done", f"lock taken ({info.who}, pid {info.pid})"))
            guard = _Guard(watch, lock, step, progress, info)
            try:
                return await _locked_run(watch, new_argv, step, guard, steps, wait_ready=wait_ready,
                                         stop_first=stop_first, rollback=rollback, expect_argv=expect_argv)
            finally:
                await guard.done()
    except LockHeld as e:
        step(Step("lock", "failed", str(e)))
        return Outcome(False, watch.state.phase, str(e), steps=tuple(steps), refused=True)
    except (LockLost, Superseded) as e:
        return Outcome(False, watch.state.phase, str(e), invocation=progress.started, steps=tuple(steps),
                       superseded=True)
    except RestartError as e:  # GPU memory not released, or the new run never appeared, in time
        return Outcome(False, watch.state.phase, f"{e}; left: {progress.left_in()}", steps=tuple(steps),
                       invocation=progress.started, timed_out=True)
    except (ManagerError, TransportError) as e:
        step(Step("error", "failed", str(e)))
        return Outcome(False, watch.state.phase, f"{e}; left: {progress.left_in()}", steps=tuple(steps),
                       invocation=progress.started, refused=bool(getattr(e, "permanent", False)))
    except asyncio.CancelledError:
        step(Step("interrupted", "failed", progress.left_in()))
        raise


async def _locked_run(watch: Watch, new_argv: Sequence[str] | None, step: Callable[[Step], None], guard: _Guard,
                      steps: list[Step], *, wait_ready: bool, stop_first: bool, rollback: bool | None,
                      expect_argv: Sequence[str] | None) -> Outcome:
    """What `run` does once it holds the lock: the transaction, and a rollback when it failed and one is asked."""
    mgr = watch.manager
    step = _noting(step, guard)
    guard.step = step
    if expect_argv is not None and await mgr.read_argv() != list(expect_argv):
        # the change was computed (and confirmed) from other flags than there are now: someone changed them since
        step(Step("flags", "failed", "the flags changed since this was confirmed: nothing done"))
        return Outcome(False, watch.state.phase, "not done: the flags changed since it was confirmed (another "
                       "operator?); look at them again", steps=tuple(steps), refused=True)
    out = await _transaction(watch, new_argv, step, guard, wait_ready=wait_ready, stop_first=stop_first)
    do_rollback = watch.dep.auto_rollback if rollback is None else rollback
    good = None
    if not out.ok and do_rollback and wait_ready:
        with contextlib.suppress(TransportError, ManagerError):
            good = await mgr.read_saved_argv("ready")
    if out.ok or out.timed_out or good is None or list(good) == list(guard.argv):
        return replace(out, steps=tuple(steps))
    step(Step("rollback", "running", "rolling back to the last flags that reached ready"))
    back = await _transaction(watch, good, step, guard, wait_ready=True, stop_first=True)
    return Outcome(False, back.phase, f"{out.message}; rolled back: {back.message}", failure=out.failure,
                   invocation=back.invocation, steps=tuple(steps), rolled_back=True)


async def _transaction(watch: Watch, new_argv: Sequence[str] | None, step: Callable[[Step], None], guard: _Guard,
                       *, wait_ready: bool, stop_first: bool) -> Outcome:
    """flags, stop, release, start, follow: every step on a lock proven still ours."""
    mgr = watch.manager
    progress = guard.progress
    progress.started, progress.ready = "", False
    old_argv = await mgr.read_argv()
    argv = list(new_argv) if new_argv is not None else old_argv
    guard.argv = old_argv
    unit = await watch.poll_unit()
    guard.saw(unit)
    changes = diff(old_argv, argv, watch.flag_specs)
    if changes:
        await guard.check()
        await guard.act("flags", lambda: mgr.write_argv(argv), also_argv=[argv])
        progress.flags = "; ".join(changes)
        step(Step("flags", "done", "flags written: " + progress.flags))
    else:
        step(Step("flags", "skipped", "flags unchanged"))
    guard.argv = argv
    old_inv = unit.invocation
    if unit.running and stop_first:
        pids = old_pids(watch)
        await guard.check()
        step(Step("stop", "running", f"stopping {mgr.target} (pid {unit.main_pid})"))
        watch.action("stop")
        t0 = time.monotonic()
        progress.asked = "stop"
        await guard.act("stop", mgr.stop, also_runs=[(old_inv, False)])
        progress.stopped = True
        guard.saw(await watch.poll_unit())
        step(Step("stop", "done", f"stopped in {time.monotonic() - t0:.1f} s"))
    else:
        pids = {unit.main_pid} if unit.main_pid else set()
        step(Step("stop", "skipped", "was not running"))
    snap = await wait_for_release(watch, pids, step, watch.dep.release_timeout_s, guard=guard)
    if snap is not None and snap.gpus:
        watch.save_baseline(snap)
    await guard.check()  # the step that must never run twice at once: two starts into the same GPUs
    step(Step("start", "running", "starting " + " ".join(argv[:3]) + (" ..." if len(argv) > 3 else "")))
    watch.action("start")

    asked = False

    async def start() -> None:
        nonlocal asked
        now = await watch.poll_unit()
        if now.invocation not in ("", old_inv):
            if not asked:  # someone started it meanwhile, outside the lock: not ours to follow
                raise await _superseded(watch, now, now, guard)
            return  # an attempt lost with the link went through
        asked = True
        progress.asked = "start"
        await mgr.start(argv)
    await guard.act("start", start, also_runs=[(old_inv, False)], also_new_run=True)
    ours = await _new_invocation(watch, old_inv)
    progress.started = ours.invocation
    guard.saw(ours)
    step(Step("start", "done", f"started: pid {ours.main_pid}, invocation {ours.invocation[:12]}"))
    if not wait_ready:
        return Outcome(True, watch.state.phase, "started", invocation=ours.invocation)
    try:
        phase, failure = await follow_new(watch, ours, watch.dep.ready_timeout_s, step, guard)
    except (LockLost, Superseded) as e:
        step(Step("follow", "failed", str(e)))
        raise
    except RestartError as e:
        step(Step("follow", "failed", str(e)))
        return Outcome(False, watch.state.phase, str(e), invocation=ours.invocation, timed_out=True)
    if phase == Phase.READY:
        progress.ready = True
        try:  # a blip here must not turn a ready run into a failed restart (a sweep would file it so)
            await mgr.save_argv("ready", argv)
        except (TransportError, ManagerError) as e:
            step(Step("follow", "running", f"ready; the flags could not be recorded as the last good ones: {e}"))
        step(Step("follow", "done", "ready: a generation from the new process succeeded"))
        return Outcome(True, phase, "ready", invocation=ours.invocation)
    msg = f"failed in {failure.phase}: {failure.kind}" if failure else "failed"
    step(Step("follow", "failed", msg))
    return Outcome(False, phase, msg, failure=failure, invocation=ours.invocation)


async def stop(watch: Watch, on_step: Callable[[Step], None]) -> Outcome:
    """Stop under the lock, then wait until the GPU memory is released: stopped means a start may follow at once
    (the seeds' `stop; sleep 8; start` started into the old run's memory)."""
    steps, step = _stepper(on_step)
    progress = Progress(watch.name)
    try:
        lock = watch.manager.lock(f"stop {watch.name}")
        async with lock as info:
            step(Step("lock", "done", f"lock taken ({info.who}, pid {info.pid})"))
            guard = _Guard(watch, lock, step, progress, info)
            try:
                return await _locked_stop(watch, _noting(step, guard), guard, steps)
            finally:
                await guard.done()
    except LockHeld as e:
        step(Step("lock", "failed", str(e)))
        return Outcome(False, watch.state.phase, str(e), steps=tuple(steps), refused=True)
    except LockLost as e:
        return Outcome(False, watch.state.phase, str(e), steps=tuple(steps), superseded=True)
    except RestartError as e:
        return Outcome(False, Phase.STOPPED, f"stopped, but {e}", steps=tuple(steps), timed_out=True)
    except (ManagerError, TransportError) as e:
        step(Step("error", "failed", str(e)))
        return Outcome(False, watch.state.phase, f"{e}; left: {progress.left_in()}", steps=tuple(steps),
                       refused=bool(getattr(e, "permanent", False)))
    except asyncio.CancelledError:
        step(Step("interrupted", "failed", progress.left_in()))
        raise


async def _locked_stop(watch: Watch, step: Callable[[Step], None], guard: _Guard, steps: list[Step]) -> Outcome:
    guard.step = step
    progress = guard.progress
    guard.argv = await watch.manager.read_argv()
    unit = await watch.poll_unit()
    guard.saw(unit)
    # a stop already under way (deactivating: by hand, or one interrupted) is waited for like ours
    if not unit.running and unit.active != "deactivating":
        step(Step("stop", "skipped", "was not running"))
        return Outcome(True, Phase.STOPPED, "not running", steps=tuple(steps))
    pids = old_pids(watch)
    step(Step("stop", "running", f"stopping {watch.manager.target} (pid {unit.main_pid})"))
    watch.action("stop")
    t0 = time.monotonic()
    progress.asked = "stop"
    await guard.act("stop", watch.manager.stop, also_runs=[(unit.invocation, False)])
    progress.stopped = True
    took = time.monotonic() - t0
    guard.saw(await watch.poll_unit())
    step(Step("stop", "done", f"stopped in {took:.1f} s"))
    await wait_for_release(watch, pids, step, watch.dep.release_timeout_s, guard=guard)
    return Outcome(True, Phase.STOPPED, f"stopped in {took:.1f} s; {steps[-1].detail}", steps=tuple(steps),
                   stop_s=round(took, 1))
