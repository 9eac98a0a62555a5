"""Waiting on a condition in a Pilot test: the app runs while the test waits, and no test sleeps a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot


async def until(pilot: Pilot[Any], cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Whether `cond` held within `timeout` seconds, checked every 20 ms with the app running in between."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return True
        await pilot.pause(0.02)
    return cond()
