"""A container's log, read through its engine's CLI (`docker logs` / `podman logs --timestamps`) for the docker and
compose managers (docker.py).

- Followed live from the run's first line (`log_start`: after the previous run of the same container ended), both
  streams. The engine's CLI does not keep stdout and stderr in order with each other (a stderr line can arrive after
  later stdout lines), so a resume after a dropped stream starts RESUME_MARGIN_NS before the newest stamp seen and
  skips, stamp by stamp, the lines already delivered: none lost, none twice.
- podman keeps a line that reached it in pieces as pieces, each printed with its own stamp and only the last with a
  newline, in the order of its log file: a piece of stdout can be followed by a line of stderr before the rest of
  it. So for podman each stream is followed on its own, where a line's pieces are consecutive, and joined
  (`_joined`).
- A run's log read back (`read_log_back`) is bounded (log_window.py): its first lines and its last (`--tail`), each
  read within its window (tui/transport/capped.py), never the whole log.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, Protocol

from tui.managers.container_state import invocation_of, parse_time, stamp_key, stamp_text
from tui.managers.log_window import HEAD_BYTES, TAIL_BYTES, Window, join
from tui.model import LogLine, UnitState
from tui.transport import Transport, TransportError
from tui.transport.capped import Keep, read_capped

#: `sh -c` with the command as its arguments: the container's stderr joins its stdout on the one stream a
#: transport reads (over SSH a pty merges them already); no user text is in the script itself
_BOTH_STREAMS = ["sh", "-c", 'exec "$@" 2>&1', "bringup-logs"]
#: one of the two streams alone (podman: see _joined)
_ONE_STREAM = {"stdout": ["sh", "-c", 'exec "$@" 2>/dev/null', "bringup-logs"],
               "stderr": ["sh", "-c", 'exec "$@" 2>&1 >/dev/null', "bringup-logs"]}
#: a stamp as podman 4 prints it before each piece of a line (always nine digits)
_PIECE_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}(?:Z|[+-]\d\d:\d\d)) ")
#: how far before the newest line a resumed log starts: further than stderr ever lags stdout in the CLI's output
RESUME_MARGIN_NS = 5_000_000_000
#: the fewest and most lines `logs --tail` asks for when a run's log is read back longer than its head (the engines
#: count a tail in lines only): twice as many as TAIL_BYTES holds at the head's mean line length (`tail_lines`), of
#: which the last TAIL_BYTES are kept (log_window.py)
TAIL_LINES_MIN = 1024
TAIL_LINES_MAX = 262_144
#: how long podman's whole log may take to read through for its tail (read_log says why): bounded in memory, not in
#: time
PODMAN_TAIL_TIMEOUT_S = 600.0


class ContainerCli(Protocol):
    """Where a container's log is read: its host's transport, the engine's CLI, and the container's name as it is now
    (compose finds its service's container anew)."""

    @property
    def transport(self) -> Transport: ...

    @property
    def engine(self) -> str: ...

    @property
    def container(self) -> str: ...


def log_start(info: dict[str, Any] | None, unit: UnitState, engine: str) -> str:
    """Where this run's log begins: after the previous run of the same container ended (inspect shows that end while
    the new run lives), else the container's whole log (a new container has no older lines)."""
    if info is None or invocation_of(info) != unit.invocation or not unit.running:
        return ""
    state = info.get("State") or {}
    finished = str(state.get("FinishedAt") or "")
    if engine == "podman" and parse_time(finished) is not None:
        # conmon stamps a line when it reads it, after the previous run's FinishedAt for its last lines: this
        # run's start is the floor then (a line of this run is read, so stamped, after its process started)
        started = str(state.get("StartedAt") or "")
        if parse_time(started) is not None and (stamp_key(started) or 0) > (stamp_key(finished) or 0):
            return started
    return finished


async def follow_log(c: ContainerCli, unit: UnitState, since: str, ended: Callable[[], Awaitable[bool]]
                     ) -> AsyncGenerator[LogLine, None]:
    """This run's lines from `since` (`log_start`) on, then live, both streams; ends when `ended` says the run has
    (asked each time a stream ends: `logs --follow` ends with the run, or when its stream drops)."""
    if c.engine != "podman":
        async with contextlib.aclosing(_follow(c, unit, _BOTH_STREAMS, since, ended)) as lines:
            async for line in lines:
                yield line
        return
    queue: asyncio.Queue[LogLine | None] = asyncio.Queue(maxsize=1000)

    async def pump(which: list[str]) -> None:
        try:
            async with contextlib.aclosing(_follow(c, unit, which, since, ended)) as lines:
                async for line in lines:
                    await queue.put(line)
        finally:
            await queue.put(None)

    tasks = [asyncio.create_task(pump(w)) for w in _ONE_STREAM.values()]
    try:
        done = 0
        while done < len(tasks):
            item = await queue.get()
            if item is None:
                done += 1
            else:
                yield item
        for t in tasks:
            await t  # a stream that failed says so here
    finally:
        for t in tasks:
            t.cancel()
        # each pump's stream is closed (its command reaped) before this one's close returns
        await asyncio.gather(*tasks, return_exceptions=True)


async def _follow(c: ContainerCli, unit: UnitState, streams: list[str], since: str,
                  ended: Callable[[], Awaitable[bool]]) -> AsyncGenerator[LogLine, None]:
    floor = stamp_key(since) if parse_time(since) is not None else None
    delivered: dict[int, int] = {}  # stamp -> lines of that stamp delivered
    newest = 0
    at = 0.0
    backoff = 0.5
    while True:
        argv = [c.engine, "logs", "--timestamps", "--follow"]
        start = max(newest - RESUME_MARGIN_NS, floor or 0) if newest else floor
        if start:
            argv += ["--since", stamp_text(start)]
        again: dict[int, int] = {}  # stamp -> lines of that stamp read on this stream
        delivering = False  # whether the stamped line that the current pieces continue was delivered
        try:
            async with contextlib.aclosing(c.transport.stream([*streams, *argv, c.container])) as raws:
                async for raw in raws:
                    stamp, _, text = raw.partition(" ")
                    if c.engine == "podman":
                        text = _joined(stamp, text)
                    key = stamp_key(stamp)
                    if key is None:
                        # a piece after a carriage return (a progress bar) continues its stamped line; before any
                        # stamped line it is the engine's own words (no such container...): the state says those
                        if delivering:
                            yield LogLine(at=at, text=raw, invocation=unit.invocation)
                        continue
                    delivering = False
                    if floor is not None and key <= floor:
                        continue  # the previous run's last lines
                    n = again[key] = again.get(key, 0) + 1
                    if n <= delivered.get(key, 0):
                        continue  # delivered before the stream dropped
                    delivered[key] = n
                    newest = max(newest, key)
                    if len(delivered) > 20000:  # only the margin's stamps can come again
                        delivered = {k: v for k, v in delivered.items() if k >= newest - 2 * RESUME_MARGIN_NS}
                        again = {k: v for k, v in again.items() if k in delivered}
                    delivering = True
                    at = key / 1e9
                    yield LogLine(at=at, text=text, invocation=unit.invocation)
                    backoff = 0.5
        except TransportError:
            pass
        if await ended():
            return
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 10.0)


async def read_log_back(c: ContainerCli, invocation: str, begin: float, source: str) -> list[LogLine]:
    """The log of the run `invocation` that started at `begin`, bounded (log_window.py): its first lines (`logs
    --since` its start, ended at the head's window), and unless those were all of it, its last (`logs --tail`), never
    the whole log. `source`: how the log is named where it was cut."""
    argv = [c.engine, "logs", "--timestamps"]
    if begin > 0:
        argv += ["--since", stamp_text(int(begin * 1e9))]
    # no --until FinishedAt: both engines stamp a line when they read it from the pipe, so the last lines of a
    # run killed right after writing them (SGLang's fatal line, then its SIGKILL of the tree) can be stamped
    # after the exit; a stopped container's run is the last in its log anyway
    # podman: each stream on its own, where a line's stamped pieces are consecutive (follow_log says why)
    streams = list(_ONE_STREAM.values()) if c.engine == "podman" else [_BOTH_STREAMS]
    out: list[LogLine] = []
    for which in streams:
        head = await _read_window(c, [*which, *argv, c.container], begin, invocation, Keep.FIRST)
        tail = None
        if head.cut and c.engine == "podman":
            # podman's `--tail` counts the pieces conmon logged a line in, and prints them apart, out of order:
            # lines are lost. Its tail is the whole log read through, of which the last TAIL_BYTES are kept
            tail = await _read_window(c, [*which, *argv, c.container], begin, invocation, Keep.LAST,
                                      timeout=PODMAN_TAIL_TIMEOUT_S)
        elif head.cut:
            n = tail_lines(head)
            tail = await _read_window(c, [*which, *argv, "--tail", str(n), c.container], begin, invocation,
                                      Keep.LAST, asked=n)
        out += join(head, tail, invocation, source)
    return sorted(out, key=lambda x: x.at)  # stable: a line's pieces stay in order


async def _read_window(c: ContainerCli, argv: list[str], begin: float, invocation: str, keep: Keep, *,
                       asked: int = 0, timeout: float = 60.0) -> Window:
    """One end of the run's log on one stream: its first HEAD_BYTES (Keep.FIRST) or, of the lines `argv` prints
    (the `asked` last ones with `--tail`), the last TAIL_BYTES (Keep.LAST)."""
    got = await read_capped(c.transport, argv, limit=HEAD_BYTES if keep is Keep.FIRST else TAIL_BYTES,
                            keep=keep, timeout=timeout)
    raws = [_podman_line(raw) for raw in got.lines] if c.engine == "podman" else got.lines
    lines = [LogLine(at=p[0], text=p[1], invocation=invocation) for p in _stamped(raws)
             if p is not None and p[0] >= begin]
    # `--tail N` that printed N lines may have had more before them
    return Window(lines, got.cut or (asked > 0 and len(got.lines) >= asked))


def _joined(stamp: str, text: str) -> str:
    """A podman line whose later pieces each carry a stamp of their own (`ab<stamp> cd`), as the line it was.

    A stamp counts as a piece's only when it is no earlier than the line's and within a minute of it: a server
    printing nanosecond RFC 3339 stamps of its own then loses only those that fall in that minute, after a word."""
    first = stamp_key(stamp)
    if first is None or "T" not in text:
        return text
    out: list[str] = []
    at = 0
    for m in _PIECE_STAMP.finditer(text):
        key = stamp_key(m[1])
        if m.start() > 0 and key is not None and first <= key <= first + 60_000_000_000:
            out.append(text[at:m.start()])
            at = m.end()
    return "".join(out) + text[at:] if out else text


def tail_lines(head: Window) -> int:
    """How many lines `logs --tail` asks for: twice what TAIL_BYTES holds at the head's mean line length, so that the
    tail is about its window when the run's lines are like its first ones (the last TAIL_BYTES of them are kept
    whatever their length), within TAIL_LINES_MIN..TAIL_LINES_MAX."""
    chars = sum(len(x.text) + 1 for x in head.lines)
    mean = chars / len(head.lines) if head.lines else 64.0
    return max(TAIL_LINES_MIN, min(TAIL_LINES_MAX, int(2 * TAIL_BYTES / max(mean, 1.0))))


def _podman_line(raw: str) -> str:
    stamp, sep, text = raw.partition(" ")
    return f"{stamp}{sep}{_joined(stamp, text)}"


def _stamped(lines: Sequence[str]) -> list[tuple[float, str] | None]:
    """`docker logs --timestamps` lines as (time, text); a piece after a carriage return keeps its line's time."""
    out: list[tuple[float, str] | None] = []
    at: float | None = None
    for raw in lines:
        for piece_no, piece in enumerate(raw.split("\r")):
            stamp, _, text = piece.partition(" ")
            t = parse_time(stamp) if piece_no == 0 and stamp_key(stamp) is not None else None
            if t is not None:
                at = t
                out.append((t, text))
            elif at is not None:
                out.append((at, piece))
    return out
