"""The one reader that keeps a command's output within a bound (tui/transport/capped.py, issue 47.4), on real
commands through the local transport: a command that never ends is read to the bound and ended, one within it is
read whole, the last lines are kept when asked, a line longer than the bound is kept whole, a silent command is a
transport error and is reaped."""

from __future__ import annotations

import sys

import pytest

from tests.helpers.wait import slack, until_async
from tui.transport import TransportError
from tui.transport.capped import Keep, read_capped
from tui.transport.local import LIVE_GROUPS, LocalTransport


async def test_a_command_that_never_ends_is_read_to_the_bound_and_ended() -> None:
    """`yes` prints forever: the first lines up to the bound are kept, it is said to be cut, and the command is
    killed and reaped (read whole, it would never end)."""
    got = await read_capped(LocalTransport(), ["yes", "a line of output"], limit=100_000, timeout=slack(30))
    assert got.cut
    assert set(got.lines) == {"a line of output"}
    assert 100_000 <= got.size <= 100_000 + len("a line of output") + 1
    assert got.size == sum(len(x) + 1 for x in got.lines)
    # reaped: no command left running (its reaping, after the kill, can outlast the read under load: a condition)
    await until_async(lambda: f"the killed command reaped: {LIVE_GROUPS}", lambda: not LIVE_GROUPS or None, 30)


async def test_a_command_within_the_bound_is_read_whole_and_not_cut() -> None:
    got = await read_capped(LocalTransport(), ["seq", "1", "1000"], limit=1 << 20, timeout=slack(30))
    assert got.lines == [str(i) for i in range(1, 1001)] and not got.cut
    # exactly at the bound: whole, not cut (nothing more was printed)
    exact = await read_capped(LocalTransport(), ["seq", "1", "1000"], limit=got.size, timeout=slack(30))
    assert exact.lines == got.lines and not exact.cut


async def test_keeping_the_last_lines_reads_to_the_end_within_the_bound() -> None:
    """`Keep.LAST`: the command's last lines, the newest kept, the oldest dropped once past the bound."""
    got = await read_capped(LocalTransport(), ["seq", "1", "200000"], limit=10_000, keep=Keep.LAST, timeout=slack(30))
    assert got.cut and got.lines[-1] == "200000"
    assert got.lines == [str(i) for i in range(int(got.lines[0]), 200_001)]
    assert 10_000 - 8 <= got.size <= 10_000


async def test_one_line_longer_than_the_bound_is_kept_whole() -> None:
    """A line is never cut here (the transports bound a line): the bound is passed by at most one line."""
    code = "print('x' * 50_000); print('next')"
    first = await read_capped(LocalTransport(), [sys.executable, "-c", code], limit=1000, timeout=slack(30))
    assert first.lines == ["x" * 50_000] and first.cut
    last = await read_capped(LocalTransport(), [sys.executable, "-c", code], limit=1000, keep=Keep.LAST,
                             timeout=slack(30))
    assert last.lines == ["next"] and last.cut


async def test_a_command_that_says_nothing_for_too_long_is_a_transport_error() -> None:
    with pytest.raises(TransportError, match=r"did not finish within 0\.3 s"):
        await read_capped(LocalTransport(), ["sleep", "30"], limit=1000, timeout=0.3)
    # the group is killed at once; on a loaded machine its reaping may outlast the reaper's own bound, and then it
    # stays known for the command's closing: what must hold is that it is gone, not how fast
    await until_async("the timed-out command reaped", lambda: all(p.returncode is not None
                                                                   for p in LIVE_GROUPS.values()) or None, 10)


async def test_a_bound_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="reads nothing"):
        await read_capped(LocalTransport(), ["true"], limit=0)
