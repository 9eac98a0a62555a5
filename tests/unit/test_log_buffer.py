"""The log panel's buffer: the newest lines, and the errors kept apart with a bound of their own."""

from __future__ import annotations

from widgets.log_buffer import LogBuffer


def test_the_newest_lines_are_kept_in_order_with_their_kinds() -> None:
    buf = LogBuffer(lines=4, errors=2)
    for i in range(3):
        buf.append(f"l{i}", i == 1)
    assert list(buf) == [("l0", False), ("l1", True), ("l2", False)]
    assert [seq for seq, _, _ in buf.items()] == [0, 1, 2]
    assert len(buf) == 3 and buf.bound == 6


def test_an_error_outlives_the_plain_lines_that_came_after_it() -> None:
    """A chatty server's lines push out the plain lines, not the traceback before them."""
    buf = LogBuffer(lines=5, errors=3)
    buf.append("before", False)
    buf.append("Traceback (most recent call last):", True)
    buf.append("RuntimeError: CUDA error: out of memory", True)
    for i in range(100):
        buf.append(f"Decode batch {i}", False)
    assert list(buf) == [("Traceback (most recent call last):", True),
                         ("RuntimeError: CUDA error: out of memory", True)] + [
        (f"Decode batch {i}", False) for i in range(95, 100)]
    assert len(buf) == 7
    numbers = [seq for seq, _, _ in buf.items()]
    assert numbers == sorted(numbers) and numbers[:2] == [1, 2] and numbers[-1] == 102


def test_errors_have_their_own_bound_and_an_error_among_the_newest_is_listed_once() -> None:
    buf = LogBuffer(lines=3, errors=2)
    for i in range(6):
        buf.append(f"e{i}", True)
    buf.append("plain", False)
    assert list(buf) == [("e4", True), ("e5", True), ("plain", False)]
    assert len(buf) == 3
    buf.clear()
    assert list(buf) == [] and len(buf) == 0
    buf.append("after", True)
    assert [seq for seq, _, _ in buf.items()] == [7]  # numbers keep counting: a view's place is not reused
