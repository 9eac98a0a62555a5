"""The one wait on a condition: a short poll under a long deadline, never a fixed sleep. A test that waits for
something names it (`what`), so a timeout says what did not happen rather than a bare `assert False`.

`until` blocks (CLI runs, containers, scrapes); `until_async` lets the event loop run in between (an engine, a
server in the same loop, a Textual pilot: `sleep=pilot.pause`)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: what is said on a timeout: words, or a function giving them then (the state a test wants to see on failure)
What = str | Callable[[], object]


def _slack_factor() -> float:
    try:
        return max(1.0, float(os.environ.get("BRINGUP_TEST_SLACK", "1")))
    except ValueError:
        raise SystemExit("BRINGUP_TEST_SLACK: not a number") from None


#: how much longer than on an idle machine a deadline may take here ($BRINGUP_TEST_SLACK, at least 1): a CI runner
#: slower or busier than usual raises it, and no test changes
SLACK = _slack_factor()


def slack(seconds: float) -> float:
    """A deadline that only bounds a wait on a condition, stretched for a slow machine. Never for a wait that is
    the thing tested (an idle timeout, a grace period): those stay as the product has them."""
    return seconds * SLACK


class NotWithin(AssertionError):
    """The condition did not hold within its deadline."""


def _fail(what: What, timeout: float, last: object) -> NotWithin:
    said = what() if callable(what) else what
    return NotWithin(f"not within {timeout:g} s: {said} (last: {last!r})")


def _attempt(cond: Callable[[], T | None], retry_on: tuple[type[Exception], ...]) -> T | Exception | None:
    try:
        return cond()
    except retry_on as e:  # not up yet (a server still binding its port): try again
        return e


def until(what: What, cond: Callable[[], T | None], timeout: float = 30.0, *, every: float = 0.05,
          retry_on: tuple[type[Exception], ...] = ()) -> T:
    """`cond()`'s first truthy value, polled every `every` seconds for up to `timeout`; an exception of `retry_on`
    counts as not yet. The deadline is stretched by $BRINGUP_TEST_SLACK (`slack`)."""
    timeout = slack(timeout)
    deadline = time.monotonic() + timeout
    while True:
        last = _attempt(cond, retry_on)
        if last and not isinstance(last, Exception):
            return last
        if time.monotonic() >= deadline:
            raise _fail(what, timeout, last)
        time.sleep(every)


async def until_async(what: What, cond: Callable[[], T | None], timeout: float = 30.0, *, every: float = 0.05,
                      sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> T:
    """As `until`, with the event loop running between polls (`sleep`: asyncio's, or a Textual pilot's pause)."""
    timeout = slack(timeout)
    deadline = time.monotonic() + timeout
    while True:
        last = cond()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _fail(what, timeout, last)
        await sleep(every)


async def until_awaited(what: What, cond: Callable[[], Awaitable[T | None]], timeout: float = 30.0, *,
                        every: float = 0.05) -> T:
    """As `until_async`, for a condition that must itself be awaited (a command on a host, a read over a link)."""
    timeout = slack(timeout)
    deadline = time.monotonic() + timeout
    while True:
        last = await cond()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _fail(what, timeout, last)
        await asyncio.sleep(every)
