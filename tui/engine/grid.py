"""The engine's one clock grid: its periodic readings wake on shared instants.

Each timer of its own is a wake-up of the process (an epoll return, a turn of the loop, a thread's when it reads in
one): the unit's reading, the GPU sample, the watch on news and the metrics scrape, each sleeping a second from
when it last finished, drifted apart and woke the console four times a second instead of once. On the grid they
wake together, and the readings of one host's deployments go out as one command (tui/managers/systemd_show.py).
"""

from __future__ import annotations

import asyncio


def on_grid(period: float) -> float:
    """The next multiple of `period` on the loop's clock (never now: a reading that ends on the instant waits a
    whole period)."""
    now = asyncio.get_running_loop().time()
    return now + period - now % period


def grid_at_or_after(at: float, period: float = 0.5) -> float:
    """The first multiple of `period` at or after `at` (the loop's clock): a nap that need not end on the dot
    ends with the engine's other readings, at most `period` later."""
    return -(-at // period) * period


async def sleep_on_grid(period: float) -> None:
    """Sleep until the next multiple of `period`: at most `period`, less by the time the last reading took."""
    await asyncio.sleep(on_grid(period) - asyncio.get_running_loop().time())
