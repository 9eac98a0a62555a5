"""How often /metrics is scraped (tui/engine/throughput.py `metrics_loop`): every FOREGROUND_METRICS_S for the
deployment on screen, every BACKGROUND_METRICS_S for one no one looks at, and at once when it is opened. On a
virtual clock given to the loop: the test takes no time."""

from __future__ import annotations

import asyncio
import itertools

from tui.engine.throughput import BACKGROUND_METRICS_S, FOREGROUND_METRICS_S, metrics_loop


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    async def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)  # real scheduling, virtual time


async def scrape_times(background: list[bool], n: int,
                       opened_at: float | None = None) -> list[float]:
    clock = Clock()
    times: list[float] = []
    done = asyncio.Event()

    async def scrape() -> None:
        times.append(clock.now)
        if len(times) >= n:
            done.set()

    def in_background() -> bool:
        if opened_at is not None and clock.now >= opened_at:
            background[0] = False
        return background[0]

    task = asyncio.ensure_future(metrics_loop(scrape, lambda: True, in_background, lambda: None,
                                             sleep=clock.sleep))
    try:
        await asyncio.wait_for(done.wait(), 5)
    finally:
        task.cancel()
    return times[:n]


async def test_the_deployment_on_screen_is_scraped_every_foreground_interval() -> None:
    times = await scrape_times([False], 5)
    assert [b - a for a, b in itertools.pairwise(times)] == [FOREGROUND_METRICS_S] * 4


async def test_one_in_the_background_is_scraped_slower_and_at_once_when_opened(
        ) -> None:
    times = await scrape_times([True], 3)
    assert [b - a for a, b in itertools.pairwise(times)] == [BACKGROUND_METRICS_S] * 2
    times = await scrape_times([True], 3, opened_at=1.5)
    assert times[1] <= 2.0  # opened at 1.5 s: scraped within a second, not at 5 s
    assert times[2] - times[1] == FOREGROUND_METRICS_S
