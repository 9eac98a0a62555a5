"""A run's log read back within a bound, for every manager (issue 47.4): its head and its tail, never the whole.

What the lifecycle needs of an ended run is at its two ends: the start-up (the phases up to ready, the listening and
ready lines) at its head, and how it ended (the fatal line, the traceback, the last throughput line) at its tail.
The process manager reads its log file's first HEAD_BYTES and last TAIL_BYTES (process.py); the journal and the
container engines' logs are read the same way, by commands whose output is read within a bound
(tui/transport/capped.py): the run's first lines forwards, its last lines (`journalctl --reverse`, `docker logs
--tail`), and the two joined here, with one line saying that something between was not read and where the whole
log is. A 1.2 GB journal read whole took `status` to 4.0 GB of RSS; read this way it costs what the windows cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tui.model import LogLine

#: the windows of the log's text, as the process manager reads its file: its start and its end
HEAD_BYTES = 1 << 20
TAIL_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class Window:
    """One end of a run's log as read: its lines in the order written, and whether the run has more beyond them
    (after the head, before the tail)."""

    lines: Sequence[LogLine]
    cut: bool


def gap_line(at: float, invocation: str, source: str, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> LogLine:
    """The line that stands for what was not read between the head and the tail."""
    return LogLine(at=at, text=f"bringup: part of this run's output between its start and its end is not read back "
                               f"here (only about its first {head / 2**20:g} MiB and last {tail / 2**20:g} MiB are); "
                               f"the whole log: {source}", invocation=invocation)


def join(head: Window, tail: Window | None, invocation: str, source: str) -> list[LogLine]:
    """The head and the tail as one log: the head whole, then the tail's lines the head does not hold (they overlap
    when the run is shorter than both windows), with `gap_line` between them when they do not meet. `tail` None:
    not read, for the head holds the whole run (`head.cut` false)."""
    if not head.cut or tail is None:
        return list(head.lines)
    if not head.lines:
        return list(tail.lines)
    seen = Counter(head.lines)  # a line is its time, text and cursor: the same line read twice is equal
    rest: list[LogLine] = []
    met = not tail.cut  # a tail read back to the run's first line holds the head
    for line in tail.lines:
        if seen[line] > 0:
            seen[line] -= 1
            met = True
            rest.clear()  # the tail's lines up to the last one the head holds are the head's
        else:
            rest.append(line)
    if met:
        return [*head.lines, *rest]
    return [*head.lines, gap_line(head.lines[-1].at, invocation, source), *rest]
