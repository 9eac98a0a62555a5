"""The engine's one clock grid: its periodic readings wake on shared instants.

Each timer of its own is a wake-up of the process (an epoll return, a turn of the loop, a thread's when it reads in
one): the unit's reading, the GPU sample and the watch on news, each sleeping a second from when it last finished,
drifted apart and woke the console several times a second instead of once. On the grid they wake together, and the
readings of one host's deployments go out as one command (tui/managers/systemd_show.py).

Not on it: the `/metrics` scrape and the probe. A scrape on the grid came up to a second later after a run turned
ready, and until the first one the throughput is read from the log: an idle server then showed a probe's 32
tokens/s in the exporter in one run in four (tests/e2e/test_probe_not_throughput.py; a decode line read before
the ledger knew the probe it counted, most likely: not pinned down yet).
"""

from __future__ import annotations

import asyncio


def on_grid(period: float) -> float:
    """The next multiple of `period` on the loop's clock (never now: a reading that ends on the instant waits a
    whole period)."""
    now = asyncio.get_running_loop().time()
    return now + period - now % period


async def sleep_on_grid(period: float) -> None:
    """Sleep until the next multiple of `period`: at most `period`, less by the time the last reading took."""
    await asyncio.sleep(on_grid(period) - asyncio.get_running_loop().time())
