"""The engine's clock grid (tui/engine/grid.py): readings that share it wake the process once, not once each."""

from __future__ import annotations

import asyncio

import pytest

from tui.engine.grid import on_grid, on_grid_after, sleep_on_grid


async def test_readings_of_different_lengths_sleep_until_the_same_instants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reading sleeps until a multiple of the period, whatever it took: the instants asked for, not when the
    loop got round to them (a loaded machine wakes late, and that is not what is tested here)."""
    loop = asyncio.get_running_loop()
    real_sleep = asyncio.sleep
    until: list[float] = []

    async def recorded(seconds: float) -> None:
        until.append(loop.time() + seconds)
        await real_sleep(0)

    for work in (0.001, 0.013, 0.3):
        await real_sleep(work)  # a reading of its own length
        monkeypatch.setattr(asyncio, "sleep", recorded)
        await sleep_on_grid(0.05)
        monkeypatch.setattr(asyncio, "sleep", real_sleep)
    assert len(until) == 3
    assert all(abs(t / 0.05 - round(t / 0.05)) < 0.01 for t in until), until  # within the clock reads between
    assert on_grid(0.05) > loop.time()  # never now: a reading ending on the instant waits a period


async def test_a_wait_of_some_seconds_ends_on_the_grid_and_not_before_it() -> None:
    """A ready server's probe naps about two seconds and wakes with the rest: never shorter than asked, at most a
    period longer, and on a multiple of the period."""
    loop = asyncio.get_running_loop()
    for seconds in (0.05, 0.5, 1.999, 2.0):
        now = loop.time()
        at = on_grid_after(seconds, 1.0)
        assert now + seconds <= at <= loop.time() + seconds + 1.0
        assert abs(at - round(at)) < 1e-6, at
