"""A Slurm job's log: its files on the shared filesystem, read from the login host, every line tagged by its node.

A run's log is its nodes' logs (`job-RUN.NODE.log`, each line stamped by the node: slurm_script.py) and the batch
script's own output (`job-JOB.out`: where the head is, srun's and slurmstepd's words, `*** JOB 12 ON n1 CANCELLED AT
... DUE TO TIME LIMIT ***`), tagged `⟦batch⟧`. Followed with one `tail -F` over all of them (one SSH channel for a
job of any size; `tail` waits for a file that is not there yet, as a node's is until the job starts there), its
`==> FILE <==` headers telling whose each line is. A run whose files hold more than a read-back's windows is read
bounded first (its head and its end: process.py's `plan_read`, `dd` of each piece), then followed from the byte
each file was read to, one `tail` a file. Read back (`read`), every file is read within the same windows, never
whole, and the lines merged by their stamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass

from tui.guard.numbers import whole_or_none
from tui.guard.text import split_lines
from tui.lifecycle.lines import node_tag
from tui.managers.process import HEAD_BYTES, TAIL_BYTES, LogFile, Piece, parse_log_line, plan_read
from tui.model import LogLine
from tui.transport import Transport, TransportError

#: the tag of the batch script's own lines
BATCH = "batch"


@dataclass(frozen=True, slots=True)
class Source:
    """One file of a run's log and whose lines it holds (a node's name, or BATCH)."""

    path: str
    node: str


class Stamps:
    """Lines as `EPOCH TEXT` (a node's) or plain (Slurm's and srun's lines in the batch output): a plain line takes
    the last stamp seen, or the moment it was read when none was."""

    def __init__(self, invocation: str, clock: float = 0.0) -> None:
        self.invocation = invocation
        self.last = clock

    def line(self, raw: str, tag: str, now: float) -> LogLine | None:
        stamped = parse_log_line(raw, self.invocation)
        if stamped is not None:
            self.last = max(self.last, stamped.at)
            return stamped._replace(text=tag + stamped.text)
        if not raw.strip() or raw.startswith("tail: "):  # tail's own words (a file not there yet) are no line
            return None
        return LogLine(self.last or now, tag + raw, self.invocation)


async def sizes(transport: Transport, paths: Sequence[str]) -> dict[str, int]:
    """The files' sizes now, by path (one `stat`; a file that is not there has none)."""
    res = await transport.run(["stat", "-L", "-c", "%s %n", "--", *paths], timeout=15)
    out: dict[str, int] = {}
    for raw in split_lines(res.text):
        size, _, name = raw.partition(" ")
        if (n := whole_or_none(size, low=0, text=True)) is not None:
            out[name] = n
    return out


async def read_piece(transport: Transport, piece: Piece) -> list[str]:
    """The whole lines of one byte range of a file (its first partial line dropped unless it starts the file,
    its last unless it ends one)."""
    res = await transport.run(["dd", f"if={piece.path}", "iflag=skip_bytes,count_bytes", f"skip={piece.start}",
                               f"count={piece.count}", "bs=1M", "status=none"], timeout=60)
    if res.rc != 0:
        return []
    data = res.stdout
    if not piece.at_line_start:
        data = data[data.find(b"\n") + 1:]
    return split_lines(data[:data.rfind(b"\n") + 1].decode("utf-8", "replace"))


async def read_bounded(transport: Transport, source: Source, size: int, invocation: str,
                       now: float) -> list[LogLine]:
    """A file's lines up to `size`, its head and its end when it is longer than the windows (a line says where
    the rest is)."""
    pieces, skipped = plan_read([LogFile(source.path, size)], HEAD_BYTES, TAIL_BYTES)
    stamps = Stamps(invocation)
    tag = node_tag(source.node)
    out: list[LogLine] = []
    for i, piece in enumerate(pieces):
        if i == 1 and skipped:
            out.append(LogLine(out[-1].at if out else now, f"{tag}bringup: {skipped / 2**20:.1f} MiB of this "
                               f"node's output not read back here (its first {HEAD_BYTES >> 20} MiB and last "
                               f"{TAIL_BYTES >> 20} MiB are); the whole log: {source.path}", invocation))
        for raw in await read_piece(transport, piece):
            line = stamps.line(raw, tag, now)
            if line is not None:
                out.append(line)
    return out


async def read(transport: Transport, sources: Sequence[Source], invocation: str, now: float) -> list[LogLine]:
    """A run's log read back, bounded (module docstring), its files' lines merged by their stamps."""
    got = await sizes(transport, [s.path for s in sources])
    out: list[LogLine] = []
    for s in sources:
        if got.get(s.path):
            out += await read_bounded(transport, s, got[s.path], invocation, now)
    out.sort(key=lambda ln: ln.at)
    return out


async def follow(transport: Transport, sources: Sequence[Source], invocation: str,
                 now: Callable[[], float] = time.time) -> AsyncGenerator[LogLine, None]:
    """Every file's lines from its first, then live, each tagged by its node (module docstring). Ends only when the
    reader closes it (`tail -F` waits on)."""
    got = await sizes(transport, [s.path for s in sources])
    if sum(got.values()) <= HEAD_BYTES + TAIL_BYTES:
        async with contextlib.aclosing(_tail_all(transport, sources, invocation, now)) as lines:
            async for line in lines:
                yield line
        return
    for s in sources:  # a long run attached to: each file's head and end so far, then each followed from there
        for line in await read_bounded(transport, s, got.get(s.path, 0), invocation, now()):
            yield line
    async with contextlib.aclosing(_merge([_tail_one(transport, s, got.get(s.path, 0), invocation, now)
                                           for s in sources])) as lines:
        async for line in lines:
            yield line


async def _tail_all(transport: Transport, sources: Sequence[Source], invocation: str,
                    now: Callable[[], float]) -> AsyncGenerator[LogLine, None]:
    """One `tail -F` of every file from its first line: its `==> PATH <==` headers say whose the lines after are."""
    by_path = {s.path: s for s in sources}
    headers = {f"==> {s.path} <==": s for s in sources}
    current = sources[0] if len(sources) == 1 else None
    stamps = {s.path: Stamps(invocation) for s in sources}
    argv = ["tail", "-n", "+1", "-F", "--", *by_path]
    async with contextlib.aclosing(transport.stream(argv)) as raws:
        async for raw in raws:
            if raw in headers:
                current = headers[raw]
                continue
            if current is None:
                continue
            line = stamps[current.path].line(raw, node_tag(current.node), now())
            if line is not None:
                yield line


async def _tail_one(transport: Transport, source: Source, offset: int, invocation: str,
                    now: Callable[[], float]) -> AsyncGenerator[LogLine, None]:
    stamps = Stamps(invocation)
    tag = node_tag(source.node)
    async with contextlib.aclosing(transport.stream(["tail", "-c", f"+{offset + 1}", "-F", "--", source.path])) as raws:
        async for raw in raws:
            line = stamps.line(raw, tag, now())
            if line is not None:
                yield line


async def _merge(streams: Sequence[AsyncGenerator[LogLine, None]]) -> AsyncGenerator[LogLine, None]:
    """The lines of several streams as they come."""
    queue: asyncio.Queue[LogLine | None] = asyncio.Queue()

    async def pump(stream: AsyncGenerator[LogLine, None]) -> None:
        try:
            async with contextlib.aclosing(stream) as lines:
                async for line in lines:
                    queue.put_nowait(line)
        except TransportError:
            pass
        finally:
            queue.put_nowait(None)

    tasks = [asyncio.create_task(pump(s), name="bringup-slurm-log") for s in streams]
    left = len(tasks)
    try:
        while left:
            item = await queue.get()
            if item is None:
                left -= 1
                continue
            yield item
    finally:
        for t in tasks:
            t.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
