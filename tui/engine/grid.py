"""The engine's one clock grid: its periodic readings wake on shared instants.

Each timer of its own is a wake-up of the process (an epoll return, a turn of the loop, a thread's when it reads in
one): the unit's reading, the GPU sample, the watch on news, the scrape and a ready server's probes, each
sleeping from when it last finished, drifted apart and woke the console several times a second instead of once.
On the grid they wake together, and the readings of one host's deployments go out as one command
(tui/managers/systemd_show.py).

The `/metrics` scrape is on it too. Until a run's first scrape, its throughput is read from the log; a decode line
written as a probe finished (nothing running any more) showed the probe's 32-40 tokens/s for an idle server in
`bringup exporter` in 3 runs of 11 once the scrape moved onto the grid (tests/e2e/test_probe_not_throughput.py),
until such a line with a probe of bringup's about it was taken as idle (collectors/metrics.py): 0 in 16 since.
"""

from __future__ import annotations

import asyncio


def on_grid(period: float) -> float:
    """The next multiple of `period` on the loop's clock (never now: a reading that ends on the instant waits a
    whole period)."""
    now = asyncio.get_running_loop().time()
    return now + period - now % period


def on_grid_after(seconds: float, period: float = 1.0) -> float:
    """The first multiple of `period` at least `seconds` from now: a wait of about `seconds` that ends with the
    grid's other wake-ups (at most `period` longer)."""
    at = asyncio.get_running_loop().time() + seconds
    return at + (-at % period)


async def sleep_on_grid(period: float) -> None:
    """Sleep until the next multiple of `period`: at most `period`, less by the time the last reading took."""
    await asyncio.sleep(on_grid(period) - asyncio.get_running_loop().time())
