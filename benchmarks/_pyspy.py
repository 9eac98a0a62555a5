"""py-spy's raw output (`py-spy record -f raw`), read the one way both profiling benchmarks need: the samples in
which the process was working, each as its frames (outermost first) and its count. A measuring helper, not part of
bringup."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

#: frames where a process waits, not works (the event loop's poll, a thread pool's idle worker, a sleep)
IDLE = ("select (", "epoll", "poll (selectors", "wait (threading", "_wait_for_tstate_lock", "sleep (", "_worker (")


def working_samples(raw: Path) -> Iterator[tuple[list[str], int]]:
    for line in raw.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        if not any(w in frames[-1] for w in IDLE):
            yield frames, int(n)


def short(frame: str) -> str:
    """`function file.py:line`, without the file's folders."""
    return frame.split(" (")[0] + " " + frame.rsplit("/", 1)[-1].rstrip(")")
