"""When the engine's log follower hands lines to listeners (tui/engine/logs.py): a line now and then is sent in the
turn of the loop that read it (no timer: a server that logs a line a second costs no wake-up of its own), and lines
that follow within SEND_AFTER_S of a batch wait for the next one, so a busy log still makes at most about ten
batches a second."""

from __future__ import annotations

import asyncio
import contextlib

from tui.engine.logs import SEND_AFTER_S, LogFollower
from tui.lifecycle.lines import LineKind
from tui.model import LogLine, UnitState


async def test_a_line_now_and_then_goes_out_at_once_and_a_quick_second_waits_for_the_next_batch() -> None:
    arriving: asyncio.Queue[LogLine] = asyncio.Queue()

    class Manager:
        async def follow(self, unit: UnitState):  # type: ignore[no-untyped-def]
            while True:
                yield await arriving.get()

    sent: list[tuple[float, tuple[str, ...]]] = []
    got = asyncio.Event()

    def send(lines: tuple[LogLine, ...], kinds: tuple[LineKind, ...]) -> None:
        sent.append((asyncio.get_running_loop().time(), tuple(ln.text for ln in lines)))
        got.set()

    def line(text: str) -> LogLine:
        return LogLine(at=1.0, text=text, invocation="run1")

    f = LogFollower(Manager(), lambda lines: [LineKind.PLAIN] * len(lines), send)  # type: ignore[arg-type]
    unit = UnitState(active="active", invocation="run1")
    task = asyncio.create_task(f.run(lambda: unit, asyncio.Event()))
    try:
        arriving.put_nowait(line("one"))
        for _ in range(10):  # a few turns of the loop, no time: a timer would not have fired yet
            await asyncio.sleep(0)
        assert [b for _, b in sent] == [("one",)]
        assert f._send_at is None  # sent as read: no timer was set
        got.clear()
        arriving.put_nowait(line("two"))
        arriving.put_nowait(line("three"))
        await asyncio.wait_for(got.wait(), 5)
        assert [b for _, b in sent] == [("one",), ("two", "three")]  # together, in order, each once
        assert sent[1][0] - sent[0][0] >= SEND_AFTER_S - 0.005  # not before the pace allows (timer granularity)
        got.clear()
        await asyncio.sleep(SEND_AFTER_S)  # a quiet moment: the next line goes out at once again
        arriving.put_nowait(line("four"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert sent[-1][1] == ("four",) and f._send_at is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
