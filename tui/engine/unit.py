"""Following the unit: its state read every half second (and at once when poked), the log of a run that ended
before it was seen read back, the run's processes, who else holds the deployment's lock, and when news stopped.

The engine owns one `UnitFollower`, built like the log's follower: what it reads is passed in (the manager, the
reducer's state, whether the deployment is in a fleet's background) and what it finds goes out through callbacks
(`feed` to the reducer, a run's log read back, a run that changed, another holder of the lock), so the phase is
decided in one place and this module never reaches into the engine. Readings overlap (the unit loop and a restart
both ask): each is numbered, and one that a newer reading has overtaken is never applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from tui.errors import PermanentError
from tui.guard.redact import BOOK
from tui.lifecycle.reducer import LifecycleState
from tui.managers import LockInfo, LogHistory, Manager, ManagerError
from tui.managers.lock_record import other_holder
from tui.model import (
    Event,
    FlagsKnown,
    LogLine,
    LogSourceKnown,
    NewsResumed,
    NewsStopped,
    Phase,
    UnitObserved,
    UnitState,
)
from tui.transport import TransportError

from .collector_errors import CollectorErrors
from .grid import on_grid, sleep_on_grid
from .logs import scrubbed
from .view import STALE_AFTER_S

#: how often the lock's holder is read: on screen, or while another bringup holds it (its steps are shown as they go)
HOLDER_S = 2.0
#: a deployment in a fleet's background that no one else holds: its holder is read at once when its unit changes
#: (another bringup's restart stops and starts it), and at this pace besides (one that holds the lock and has not
#: touched the unit yet). A record read is a round trip to the host for each deployment: 16 of them every 10 s
#: were a tenth of a fleet's per-deployment cost (benchmarks/fleet_ssh_cost.py)
BACKGROUND_HOLDER_S = 30.0


class UnitFollower:
    def __init__(self, manager: Manager, state: Callable[[], LifecycleState], errors: CollectorErrors, *,
                 feed: Callable[[Event], None], read_back: Callable[[list[LogLine], bool], None],
                 run_changed: Callable[[float], None], holder_changed: Callable[[LockInfo | None], None],
                 pids: Callable[[UnitState], Awaitable[None]], followed: Callable[[], str],
                 background: Callable[[], bool], watch_holders: Callable[[], bool], host_name: str) -> None:
        """`read_back(lines, ended)`: a run's log so far, read at once (`ended`: the run is over, and its own ready
        line is the evidence it was ready); `run_changed(at)`: the run or whether it runs changed (not at first
        sight); `pids(unit)`: the run's processes are due to be read; `followed()`: the run whose log the log
        follower follows live (no need to read it back); `background()`: the deployment is in a fleet's background
        (its unit read less often once ready); `watch_holders()`: the lock's holder read often even then."""
        self.manager = manager
        self._state = state
        self._errors = errors
        self._feed = feed
        self._read_back = read_back
        self._run_changed = run_changed
        self._holder_changed = holder_changed
        self._pids = pids
        self._followed = followed
        self._background = background
        self._watch_holders = watch_holders
        self._host_name = host_name
        #: the unit cannot be read and waiting will not help (unknown host key, unit not found, sudo refused)
        self.permanent_error: Exception | None = None
        #: wall time of the last successful reading of the unit: what the phase shown is as old as
        self.seen_at: float | None = None
        #: another bringup's restart, start or stop in progress on this deployment, from its lock record
        self.other_holder: LockInfo | None = None
        self._news_out = False
        self._poll_seq = 0
        self._applied_seq = 0
        self._replayed = ""  # the ended run whose log was read back at first sight
        self._holder_at = -BACKGROUND_HOLDER_S
        self._holder_unit: tuple[str, str, str, int] | None = None  # the unit as it was at the last holder read
        #: the clock the holder's pace is kept by (a test's own)
        self.clock: Callable[[], float] = time.monotonic
        self._poke = asyncio.Event()
        #: set when the run or whether it runs changes: the log follower moves to the new run
        self.changed = asyncio.Event()

    async def poll(self) -> UnitState:
        # readings overlap (the unit loop and a restart both ask): one asked before a newer one that has already
        # been applied is old news, and applied after it would take the run back (the old run, inactive, after
        # ours was seen running)
        self._poll_seq += 1
        seq = self._poll_seq
        unit = await self.manager.state()
        if seq < self._applied_seq and (known := self._state().unit) is not None:
            return known
        self._applied_seq = seq
        if isinstance(self.manager, LogHistory) and unit.invocation:
            # the failure of a run with no recognised error line says where its whole log is
            src = self.manager.log_source(unit.invocation)
            if src != self._state().log_source:
                self._feed(LogSourceKnown(self._state().now, src))  # settings ride on the reducer's clock
        if (not unit.running and unit.active != "deactivating" and unit.invocation
                and unit.invocation not in (self._replayed, self._followed())):
            # a run that has ended and whose log was never followed live (seen first at start, or a run that came
            # and went between two readings, or was only ever seen stopping: a server that dies at once): its log
            # tells how it ended (a crash's traceback, the phases it went through), so read that before the
            # unit's "not running"; with its flags known, so a failure's hint is the one the live console gave
            # (DFLASH + CUDA graphs, ...). Once it is final: while it is still stopping, its last lines may be due.
            self._replayed = unit.invocation
            if unit.argv:
                BOOK.learn_argv(unit.argv)  # before its lines: they may repeat its secrets
                self._feed(FlagsKnown(self._state().now, unit.argv))
            await self.replay_history(unit.invocation, ended=True)
        prev = self._state().unit
        self.seen_at = time.time()
        if self._news_out:
            self._news_out = False
            self._feed(NewsResumed(self.seen_at))
        self._feed(UnitObserved(self.seen_at, unit))
        if prev is None or (prev.invocation, prev.running) != (unit.invocation, unit.running):
            self.changed.set()
            if prev is not None:
                # a run that changed is in question for a while; at first sight the probe is fast anyway until the
                # counters prove the run alive (cadence.py), and a fleet's engines must not all probe fast for
                # `wake_s` each time a console opens
                self._run_changed(self.seen_at)
        return unit

    async def replay_history(self, invocation: str, ended: bool = False) -> None:
        """Read a run's log so far. For a run that has ended, its own ready line is the evidence it was ready (a
        generation can no longer be asked of it, and no older process can answer for it any more)."""
        if not isinstance(self.manager, LogHistory):
            return
        lines = scrubbed(await self.manager.read_log(invocation))  # as the followed log's: secrets hidden at entry
        self._read_back(lines, ended)

    def poke(self) -> None:
        self._poke.set()

    async def refresh_holder(self, unit: UnitState | None = None) -> None:
        """Who else holds the deployment's lock (a restart, start or stop by another bringup): named in the
        console while it happens, with what it changes, instead of phases moving for no visible reason. `unit`:
        the reading just made; a unit that changed since the last read of the holder is read for at once."""
        key = (unit.active, unit.sub, unit.invocation, unit.main_pid) if unit is not None else self._holder_unit
        slow = self._background() and not self._watch_holders() and self.other_holder is None
        if (self.clock() - self._holder_at < (BACKGROUND_HOLDER_S if slow else HOLDER_S)
                and (not slow or key == self._holder_unit)):
            return
        self._holder_at = self.clock()
        self._holder_unit = key
        try:
            h = await other_holder(self.manager.lock("watch"))  # our own restart's steps are shown already
        except (TransportError, ManagerError, OSError):
            self._holder_unit = None  # not read: tried again at the next reading of the unit
            return
        if h != self.other_holder:
            self.other_holder = h
            self._holder_changed(h)

    async def run(self) -> None:
        """The unit loop: a reading every half second while the phase is in question, every second once ready (the
        log shows a crash as it happens; the reading confirms the exit), and at once when poked (an action)."""
        if not self.manager.can_control:
            return
        while True:
            try:
                unit = await self.poll()
                self._errors.cleared("unit")
                self.permanent_error = None
                await self._pids(unit)
                await self.refresh_holder(unit)
            except (TransportError, ManagerError, OSError) as err:
                self.permanent_error = err if isinstance(err, PermanentError) else None
                self._errors.failed("unit", str(err))
            with contextlib.suppress(TimeoutError):
                ready_s = 2.0 if self._background() else 1.0
                async with asyncio.timeout_at(on_grid(ready_s if self._state().phase == Phase.READY else 0.5)):
                    await self._poke.wait()
            self._poke.clear()

    async def watch_news(self) -> None:
        """An outage begins at the last reading: once news has stopped for longer than a few readings, the
        timeline gets a segment of its own (the unit loop itself is stuck in the read that hangs)."""
        while True:
            seen = self.seen_at
            if (seen is not None and not self._news_out and self.manager.can_control
                    and time.time() - seen > STALE_AFTER_S):
                self._news_out = True
                self._feed(NewsStopped(seen, f"no news from {self._host_name}"))
            await sleep_on_grid(1.0)
