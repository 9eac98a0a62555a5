"""Waiting on a condition in a Pilot test: the app runs while the test waits, and no test sleeps a fixed time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from tests.helpers.wait import NotWithin, until_async


async def until(pilot: Pilot[Any], cond: Callable[[], object], timeout: float = 30.0) -> bool:
    """Whether `cond` held within `timeout` seconds, checked every 20 ms with the app running in between (a bool:
    the test asserts it, and its own message says what was on the screen)."""
    try:
        await until_async("", cond, timeout, every=0.02, sleep=pilot.pause)
    except NotWithin:
        return False
    return True


async def settled(pilot: Pilot[Any]) -> None:
    """Until what the keys pressed and the messages posted were going to do is done: every worker they started has
    ended, and the app is idle with its screen drawn. The wait before checking that something did NOT happen (no
    dialog opened, no line drawn while paused), where no condition can say when to stop waiting."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
