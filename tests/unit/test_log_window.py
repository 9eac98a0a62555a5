"""A run's log read back within a bound (issue 47.4): the head and tail windows joined (log_window.py), and the one
reader that keeps a command's output within a bound (tui/transport/capped.py), on real commands.

The managers' own reads against a real journal and a real docker daemon: tests/e2e/test_bounded_log_reads.py."""

from __future__ import annotations

from tui.managers.container_log import TAIL_LINES_MAX, TAIL_LINES_MIN, tail_lines
from tui.managers.log_window import TAIL_BYTES, Window, gap_line, join
from tui.model import LogLine

INV = "inv"
SRC = "`journalctl _SYSTEMD_INVOCATION_ID=inv` on host"


def lines(a: int, b: int) -> list[LogLine]:
    """Lines a..b-1 of a run, each its own time and cursor (as a journal's or a stamped log's are)."""
    return [LogLine(at=float(i), text=f"line {i}", invocation=INV, cursor=f"c{i}") for i in range(a, b)]


# ---------------------------------------------------------------------------------------------- join


def test_a_head_that_holds_the_whole_run_is_the_log() -> None:
    assert join(Window(lines(0, 10), cut=False), None, INV, SRC) == lines(0, 10)
    # a tail read anyway changes nothing: the head is all of it
    assert join(Window(lines(0, 10), cut=False), Window(lines(5, 10), cut=True), INV, SRC) == lines(0, 10)


def test_windows_that_overlap_are_joined_without_a_line_twice_or_a_gap() -> None:
    """A run longer than the head and shorter than head and tail together: the tail starts inside the head."""
    got = join(Window(lines(0, 10), cut=True), Window(lines(6, 15), cut=True), INV, SRC)
    assert got == lines(0, 15)


def test_windows_that_just_meet_are_joined_without_a_gap() -> None:
    """The tail read back to the run's first line (not cut) holds the head: nothing was left out."""
    got = join(Window(lines(0, 10), cut=True), Window(lines(0, 12), cut=False), INV, SRC)
    assert got == lines(0, 12)
    got = join(Window(lines(0, 10), cut=True), Window(lines(10, 12), cut=False), INV, SRC)
    assert got == lines(0, 12)


def test_windows_far_apart_have_one_line_between_saying_what_was_not_read_and_where_it_is() -> None:
    got = join(Window(lines(0, 10), cut=True), Window(lines(1000, 1010), cut=True), INV, SRC)
    assert got[:10] == lines(0, 10) and got[11:] == lines(1000, 1010)
    gap = got[10]
    assert gap == gap_line(9.0, INV, SRC)
    assert gap.invocation == INV and gap.at == 9.0
    assert gap.text.startswith("bringup: part of this run's output") and gap.text.endswith(f"the whole log: {SRC}")
    assert "first 1 MiB and last 4 MiB" in gap.text


def test_an_empty_head_gives_the_tail() -> None:
    assert join(Window([], cut=True), Window(lines(5, 8), cut=True), INV, SRC) == lines(5, 8)


# ---------------------------------------------------------------------------------------------- docker's tail


def test_dockers_tail_asks_twice_the_lines_its_window_holds_at_the_heads_line_length() -> None:
    """The engines count `--tail` in lines: as many as fill the tail's window twice at the head's mean line
    length (the last TAIL_BYTES of them are kept), within a floor and a ceiling."""
    long = Window([LogLine(at=0.0, text="y" * 3999, invocation=INV)] * 10, cut=True)
    assert tail_lines(long) == 2 * TAIL_BYTES // 4000
    short = Window([LogLine(at=0.0, text="y", invocation=INV)] * 10, cut=True)
    assert tail_lines(short) == TAIL_LINES_MAX
    huge = Window([LogLine(at=0.0, text="y" * 10**6, invocation=INV)], cut=True)
    assert tail_lines(huge) == TAIL_LINES_MIN
