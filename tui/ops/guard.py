"""The lock kept honest through a whole restart or stop, and the account of what the transaction has done.

A remote lock can be lost under a running transaction (a dropped SSH connection frees it). The guard checks it
on the host before each step and while waiting, takes it back only when nothing changed meanwhile, and otherwise
ends the transaction with what it left behind (`Progress`), which is also what Ctrl-C reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tui.errors import PermanentError
from tui.managers import AsyncLock, LockHeld, LockInfo, ManagerError
from tui.managers.lock_record import is_other_taking
from tui.model import Step, StepStatus, UnitState
from tui.ops.errors import LockLost
from tui.transport import TransportError


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
    #: whether the deployment was running when the transaction began: a stopped one has no "running server"
    was_running: bool = True

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
        elif self.flags and not self.was_running:
            rest = (f"it was not running, and is not: the new flags apply at its next start "
                    f"(`bringup start {self.name}`)")
        elif self.flags:
            rest = "the running server still has the old flags (they apply at its next start)"
        else:
            rest = "nothing changed"
        return ", ".join([*done, rest])


class LockGuard:
    """The lock, kept honest through a whole transaction: before each step, and while it waits, the lock is checked
    on the host. A lost lock is taken again only when nothing changed meanwhile (same flags, same run); otherwise
    the transaction stops and says what state it left.

    It reads the flags and the unit through the two callables it is given, not through the engine: whether
    "nothing changed" is all it asks of them."""

    REGAIN_S = 60.0

    def __init__(self, lock: AsyncLock, step: Callable[[Step], None], progress: Progress, info: LockInfo, *,
                 read_argv: Callable[[], Awaitable[list[str]]],
                 poll_unit: Callable[[], Awaitable[UnitState]]) -> None:
        self.lock = lock
        self.step = step
        self.progress = progress
        self.info = info
        self.read_argv = read_argv
        self.poll_unit = poll_unit
        self.argv: list[str] = []
        self.run: tuple[str, bool] = ("", False)  # (invocation, running) as this transaction last saw it
        self._checked = 0.0
        self._note = ""
        self._noting: asyncio.Task[None] | None = None
        #: while an action is retried: the states it may itself have brought about, before the link dropped
        self.also_runs: list[tuple[str, bool]] = []
        self.also_argv: list[list[str]] = []
        self.also_new_run = False
        #: what each note in the lock's record starts with (a sweep's "sweep 2/4 NAME: ")
        self.note_prefix = ""

    def saw(self, unit: UnitState) -> None:
        self.run = (unit.invocation, unit.running)

    def noting(self, step: Callable[[Step], None]) -> Callable[[Step], None]:
        """`step`, each step also written into the lock's record; the guard's own steps go the same way."""
        def both(s: Step) -> None:
            step(s)
            self.noted(s)
        self.step = both
        return both

    def noted(self, s: Step) -> None:
        """Each step into the lock's record, so that another console shows it as it happens; written in the
        background, newest first (a slow host never delays the restart for it)."""
        self._note = f"{self.note_prefix}{s.name}: {s.detail}"
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

    async def taken_over_by(self) -> LockInfo | None:
        """Whoever holds the lock now, if that is not this transaction's taking; None too when it cannot be asked."""
        holder = None
        with contextlib.suppress(TransportError, ManagerError, OSError):
            holder = await self.lock.holder()
        return holder if is_other_taking(holder, self.info) else None

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
                if isinstance(e, PermanentError) and not isinstance(e, LockHeld):
                    raise  # an unknown host key, a unit gone: said as such (exit 2), not as a lost lock
                if isinstance(e, LockHeld) or time.monotonic() > deadline:
                    self.step(Step("lock", StepStatus.FAILED, f"lost the lock and could not take it back: {e}"))
                    raise LockLost(f"lost the lock ({e}); left: {self.progress.left_in()}") from None
                if not said:
                    self.step(Step("lock", StepStatus.RUNNING, f"cannot check the lock: {e}; retrying"))
                    said = True
                await asyncio.sleep(1.0)

    async def _regain(self) -> None:
        argv = await self.read_argv()
        unit = await self.poll_unit()
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
            self.step(Step("lock", StepStatus.FAILED, f"lock lost, and {what} changed meanwhile{by}"))
            whose = "with other flags than this command wrote" if argv != self.argv else "not this command's run"
            raise LockLost(f"lost the lock and {what} changed meanwhile{by}: {now_txt}, {whose}; "
                           f"before that this command had: {self.progress.left_in()}")
        self.info = await self.lock.retake()
        self.step(Step("lock", StepStatus.DONE,
                       "lock lost (connection dropped?) and taken back: nothing changed meanwhile"))

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
                if isinstance(e, PermanentError) or attempt == 2:
                    raise
                self.step(Step(what, StepStatus.RUNNING,
                               f"connection lost during {what} ({e}); retrying once it is back"))
                self.also_runs, self.also_argv, self.also_new_run = list(also_runs), list(also_argv), also_new_run
                self._checked = 0.0
                try:
                    await self.check()
                finally:
                    self.also_runs, self.also_argv, self.also_new_run = [], [], False
