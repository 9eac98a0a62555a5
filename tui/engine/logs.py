"""Following the current run's log, with the engine's one log buffer.

Lines are handed on twice, from one buffer: at once to `apply` (the reducer: a fatal line is seen in the same turn
of the loop it was read in), which gives back each line's kind for the errors view, and in batches to `send`
with their kinds (listeners: a console draws a batch at a time). Lines read
without the loop running in between are applied together (call_soon): no latency, far less work per line; a long
burst is applied APPLY_CHUNK lines at a time with the loop let in between, so keys and the screen keep up. What
was read in one turn of the loop is sent in that turn when nothing was sent for SEND_AFTER_S (a server logging a
line now and then: no timer, no wake-up of its own); else, and in a burst, a batch is sent SEND_AFTER_S after the
last one, or at SEND_LINES lines: at most about ten batches a second. A quiet log costs no wake-ups at all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from tui.guard.redact import BOOK, scrub
from tui.lifecycle.lines import LineKind
from tui.managers import Manager
from tui.model import LogLine, UnitState

from .grid import on_grid

APPLY_CHUNK = 250
SEND_AFTER_S = 0.1
#: at a burst's 20,000 lines/s, ten batches a second as SEND_AFTER_S gives a slower log: at 1,000 lines the console
#: drew twenty, for 0.03-0.04 s less lag and about a tenth more CPU (benchmarks/log_burst.py --terminal pty, VM:
#: 76-84 % of a core at 1,000, 65-72 % at 2,000)
SEND_LINES = 2000


def scrubbed(lines: Sequence[LogLine]) -> list[LogLine]:
    """A server's lines as they enter the engine, each secret's value `***` (tui/guard/redact.py): a server that
    echoes its command line (a rejected flag, SGLang's `server_args=...`) shows its keys; from here on the reducer,
    the failure's excerpt, the console's log panel, the history and every record hold the redacted text. Used for
    the followed log and for a log read back (engine/unit.py) alike."""
    out = []
    for line in lines:
        text = scrub(line.text)
        out.append(line if text is line.text else line._replace(text=text))
    return out


class LogFollower:
    def __init__(self, manager: Manager, apply: Callable[[list[LogLine]], Sequence[LineKind]],
                 send: Callable[[tuple[LogLine, ...], tuple[LineKind, ...]], None]) -> None:
        self.manager = manager
        self._apply = apply
        self._send = send
        #: lines read and not yet sent; the first `_applied` of them have been applied, and have their kinds
        self._lines: list[LogLine] = []
        self._kinds: list[LineKind] = []
        self._applied = 0
        self._send_at: asyncio.TimerHandle | None = None
        #: when the last batch was sent, on the loop's clock
        self._sent_at = float("-inf")
        #: the run whose log is (or was last) followed live: a run that ended without being followed is read back
        self.followed = ""

    async def run(self, current: Callable[[], UnitState | None], changed: asyncio.Event) -> None:
        """Follows the current invocation's log; moves to the next one when the invocation changes."""
        following = ""
        task: asyncio.Task[None] | None = None
        try:
            while True:
                unit = current()
                if unit is not None and unit.running and unit.invocation and unit.invocation != following:
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await task
                    following = self.followed = unit.invocation
                    task = asyncio.create_task(self._follow(unit))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(on_grid(2.0)):  # a look now and then, with the engine's others
                        await changed.wait()
                changed.clear()
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _follow(self, unit: UnitState) -> None:
        loop = asyncio.get_running_loop()
        # closed here, not by the collector of unreferenced generators: its close would be a task of its own that
        # nothing awaits, its command reaped (or not) after the loop has moved on, or closed
        BOOK.learn_argv(unit.argv)  # the run's own secrets, hidden wherever its lines repeat them
        async with contextlib.aclosing(self.manager.follow(unit)) as stream:
            async for line in stream:
                text = scrub(line.text)  # at entry: nothing after this sees a secret's value
                self._lines.append(line if text is line.text else line._replace(text=text))
                due = len(self._lines) - self._applied
                if due == 1:
                    loop.call_soon(self.apply_due, True)
                elif due >= APPLY_CHUNK:  # a long burst: let the screen and the keys in
                    self.apply_due()
                    await asyncio.sleep(0)

    def apply_due(self, turn_ended: bool = False) -> None:
        """Apply the lines read since the loop last ran; send them, start a batch for listeners, or send a full one.
        `turn_ended`: all that one turn of the loop read is in (not a burst's chunk, nor an event's turn to wait)."""
        if self._applied == len(self._lines):
            return
        lines = self._lines[self._applied:]
        self._applied = len(self._lines)
        self._kinds.extend(self._apply(lines))
        if len(self._lines) >= SEND_LINES:
            self.send_due()
        elif self._send_at is None:
            loop = asyncio.get_running_loop()
            wait = self._sent_at + SEND_AFTER_S - loop.time()
            if turn_ended and wait <= 0:
                self.send_due()
            else:
                self._send_at = loop.call_later(wait if turn_ended else SEND_AFTER_S, self.send_due)

    def send_due(self) -> None:
        if self._send_at is not None:
            self._send_at.cancel()
            self._send_at = None
        self.apply_due()  # a line read in this same turn of the loop is applied before it is shown
        if self._lines:
            batch, kinds = self._lines, self._kinds
            self._lines, self._kinds, self._applied = [], [], 0
            self._sent_at = asyncio.get_running_loop().time()
            self._send(tuple(batch), tuple(kinds))

    def close(self) -> None:
        """Drop what was not sent: nothing is delivered after the engine closes."""
        if self._send_at is not None:
            self._send_at.cancel()
            self._send_at = None
        self._lines, self._kinds, self._applied = [], [], 0
