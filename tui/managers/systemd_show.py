"""One `systemctl show` per host for every unit read at the same moment.

Sixteen deployments on four hosts, each reading its unit every two seconds, were eight SSH commands a second, and an
SSH command costs a channel's worth of packets (open, exec, data, exit status, EOF, close) on both ends: most of the
fleet's cost. `systemctl show A B C` prints one block per unit, in the order asked, separated by an empty line; so
readings asked within `GATHER_S` of each other on the same transport go out as one command. The engines read on a
shared grid (tui/engine/unit.py), so the readings of a host's deployments do arrive together.

A reading is never older or wrong for being batched: every caller waits for a command started after it asked, and a
batch whose answer cannot be split one block per unit (a unit systemd refuses, a block missing) is asked again unit
by unit, so one bad unit is that unit's error only.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence

from tui.guard.text import split_lines
from tui.transport import CommandResult, Transport

#: how long a reading waits for others to join it: the grid wakes engines within a millisecond of each other
GATHER_S = 0.01


def split_blocks(text: str) -> list[str]:
    """`systemctl show`'s output for several units: blocks separated by one empty line."""
    blocks, cur = [], []
    for line in split_lines(text):
        if line.strip():
            cur.append(line)
        elif cur:
            blocks.append("\n".join(cur))
            cur = []
    if cur:
        blocks.append("\n".join(cur))
    return blocks


class ShowBatch:
    """The pending readings of one transport; `show()` answers with that unit's own `systemctl show` result."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._pending: dict[tuple[str, ...], dict[str, list[asyncio.Future[CommandResult]]]] = {}
        #: commands sent (a test and the fleet benchmark count them)
        self.commands = 0

    @property
    def waiting(self) -> int:
        """Readings asked for and not sent yet (a test waits for the batch to have gone out)."""
        return sum(len(futs) for w in self._pending.values() for futs in w.values())

    async def show(self, unit: str, options: Sequence[str]) -> CommandResult:
        """`systemctl show UNIT *options` as if run alone. Only readings with the same options are batched."""
        key = tuple(options)
        fut: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        waiting = self._pending.get(key)
        if waiting is None:
            waiting = self._pending[key] = {}
            asyncio.get_running_loop().call_later(GATHER_S, self._flush, key)
        waiting.setdefault(unit, []).append(fut)
        return await fut

    def _flush(self, key: tuple[str, ...]) -> None:
        # a reader that has gone meanwhile (cancelled: its engine closed, its command ended) is not asked for: a
        # batch nobody waits on any more is not sent, and one whose last reader goes while it runs is cancelled.
        # Otherwise the command outlives its readers, and a CLI exiting meanwhile leaves a task behind that fails
        # on the closed transport after the loop stops ("Task exception was never retrieved", CI saw it)
        waiting = {u: live for u, futs in self._pending.pop(key, {}).items() if (live := [f for f in futs
                                                                                         if not f.done()])}
        if not waiting:
            return
        task = asyncio.ensure_future(self._send(key, waiting))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
        futures = [f for futs in waiting.values() for f in futs]

        def reader_gone(_: asyncio.Future[CommandResult]) -> None:
            if not task.done() and all(f.done() for f in futures):
                task.cancel()
        for f in futures:
            f.add_done_callback(reader_gone)

    async def _run(self, units: list[str], options: tuple[str, ...]) -> CommandResult:
        self.commands += 1
        return await self.transport.run(["systemctl", "show", *units, *options])

    async def _send(self, options: tuple[str, ...], waiting: dict[str, list[asyncio.Future[CommandResult]]]) -> None:
        units = list(waiting)
        futures = [f for futs in waiting.values() for f in futs]
        try:
            answers = await self._answers(units, options)
        except Exception as e:  # the transport's error is every waiting reader's
            for f in futures:
                if not f.done():
                    f.set_exception(e)
            return
        except BaseException:  # cancelled (the loop is closing): so are they
            for f in futures:
                f.cancel()
            raise
        for unit, futs in waiting.items():
            for f in futs:
                if not f.done():
                    f.set_result(answers[unit])

    async def _answers(self, units: list[str], options: tuple[str, ...]) -> dict[str, CommandResult]:
        if len(units) > 1:
            res = await self._run(units, options)
            blocks = split_blocks(res.text) if res.rc == 0 else []
            if len(blocks) == len(units):
                return {u: CommandResult(0, (b + "\n").encode(), b"") for u, b in zip(units, blocks, strict=True)}
        # one unit, or a batch that did not split cleanly: each asked alone, each with its own exit and message
        results = await asyncio.gather(*(self._run([u], options) for u in units))
        return dict(zip(units, results, strict=True))


_BATCHES: weakref.WeakKeyDictionary[Transport, ShowBatch] = weakref.WeakKeyDictionary()


def batch_for(transport: Transport) -> ShowBatch:
    """The transport's batch: every systemd manager on one host shares it, as they share the connection."""
    b = _BATCHES.get(transport)
    if b is None:
        b = _BATCHES[transport] = ShowBatch(transport)
    return b
