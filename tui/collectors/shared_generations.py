"""bringup's own generations, shared by its processes that watch one deployment: a small file in the state directory.

A generation sent by `bringup restart` (the new run's proof), by `bringup status` or by another console is as much
bringup's own as this process's probes, and the server counts it and logs it like any other: an exporter started a
moment after a restart read the restart's generation back from the server's log as 26 tok/s of an idle server. Each
prober appends the generations it has sent once they ended (when sent, when answered, their tokens); each ledger
takes in the others' whenever the file has changed (one stat a question, no read otherwise). The file stays small:
a writer that finds it past `MAX_BYTES` rewrites it with the last `keep_s` seconds only.

Advisory: a file that cannot be written or read leaves each process with its own generations only, as before; no
error of it reaches the user. Written by hand: one appended line per generation, the file read again whole when its
stamp changed, is all it takes, and no library shares an append-only ledger between processes more simply.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from tui.guard.files import open_private, write_private
from tui.guard.numbers import MAX_WHOLE, epoch_or_none, whole_or_none
from tui.guard.text import split_lines

#: past this size, a writer keeps only the generations of the last `keep_s` seconds (a probe every 30 s a process:
#: days of probing before a rewrite)
MAX_BYTES = 64 * 1024
#: the most read at once: a file grown past it (not by bringup) is read in parts, one a question
_READ_MAX = 1024 * 1024
#: a line longer than this is no line of ours (the file is in the user's own state directory, but read it safely)
_LINE_MAX = 200


@dataclass(frozen=True, slots=True)
class SharedGeneration:
    """One generation another process of bringup sent: when, and how many tokens (those asked for where no answer
    said)."""

    writer: str
    began: float
    ended: float
    tokens: int


def _parse(line: str) -> SharedGeneration | None:
    parts = line.split()
    if len(parts) != 4 or len(line) > _LINE_MAX:
        return None
    # the numbers as every number from outside is taken (tui/guard/numbers.py): a line with `inf`, `nan`, `1_0` or
    # a moment outside 1970..2200 is no line of ours, and is skipped like a torn one
    began, ended = epoch_or_none(parts[1]), epoch_or_none(parts[2])
    tokens = whole_or_none(parts[3], low=0, high=MAX_WHOLE, text=True)
    if began is None or ended is None or tokens is None or ended < began:
        return None
    return SharedGeneration(parts[0], began, ended, tokens)


class SharedGenerations:
    """The file of one deployment's generations, as one ledger writes and reads it (`writer`: that ledger's own
    name in it, so that it never reads its own lines back)."""

    def __init__(self, path: Path, writer: str, *, keep_s: float) -> None:
        self.path = path
        self.writer = writer
        self.keep_s = keep_s
        self._stamp: tuple[int, int, int] | None = None  # (inode, size, mtime) when last read whole
        #: the generations already given (a rewritten file is read again from its start), pruned past `keep_s`
        self._given: dict[tuple[str, float], float] = {}

    def append(self, began: float, ended: float, tokens: int) -> None:
        line = f"{self.writer} {began:.3f} {ended:.3f} {max(0, tokens)}\n"
        with contextlib.suppress(OSError):
            # one write of one short line with O_APPEND: lines of several processes never interleave; 0600 in a 0700
            # directory, no link followed (tui/guard/files.py)
            fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, line.encode())
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > MAX_BYTES:
                self._trim(ended)

    def _trim(self, now: float) -> None:
        """Keep the last `keep_s` seconds: written beside and renamed over, so a reader sees one file or the other."""
        keep = [g for g in self._read_all() if now - g.ended < self.keep_s]
        write_private(self.path, "".join(f"{g.writer} {g.began:.3f} {g.ended:.3f} {g.tokens}\n" for g in keep))

    def _read_all(self) -> list[SharedGeneration]:
        with open(self.path, encoding="ascii", errors="replace") as f:
            return [g for line in split_lines(f.read(_READ_MAX)) if (g := _parse(line)) is not None]

    def news(self) -> list[SharedGeneration]:
        """The other processes' generations not given before."""
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp == self._stamp:
            return []
        try:
            with open(self.path, "rb") as f:
                data = f.read(_READ_MAX)
        except OSError:
            return []
        # read whole each time it changed (a probe's line every 30 s a process, a file of a few KiB): an offset
        # would misread a file rewritten under the same inode number; a line still being written is left for later
        end = data.rfind(b"\n") + 1
        self._stamp = stamp if end == len(data) else None
        lines = [g for line in split_lines(data[:end].decode("ascii", errors="replace"))
                 if (g := _parse(line)) is not None and g.writer != self.writer]
        newest = max((g.ended for g in lines), default=0.0)
        new = [g for g in lines if newest - g.ended < self.keep_s and (g.writer, g.began) not in self._given]
        self._given.update(((g.writer, g.began), g.ended) for g in new)
        self._given = {k: e for k, e in self._given.items() if newest - e < self.keep_s}
        return new
