"""When to probe the endpoint, and how: the schedule. The prober (tui/collectors/probes.py) sends one request;
this decides which one and how often from the phase, so the reducer gets the evidence it needs and no more.

- starting or loading: only a connect (is anything listening yet?);
- once the server has said it is ready (or has no log to say it): /health and a real generation, at twice the
  rate until a generation succeeds: readiness is proven by a generation, never by /v1/models;
- ready: a generation every `probe.ready_interval_s` (30 s), and /health every other interval in between unless the
  counters prove the run alive (tui/engine/cadence.py: /metrics or the log's stat lines show it serving, or idle by
  its own gauges); back to /health at once when they stall, the unit changes or an action starts; the operator's
  ask (the console's `g`) sends one generation at once and leaves the pace as it was;
- failed, stopping, not running, or paused: nothing;
- once a run has said it is ready and its log has not named its release: one request for it (engine/server_version.py).

The loop is given what it reads (the prober, the reducer's state, the cadence, whether the console paused it) and
hands each answer to `answered` (the engine feeds it to the reducer and tells its listeners).

A generation is real work the server counts like any other: the prober keeps a ledger of its generations and their
tokens, which the throughput tracker reads the server's figures with (its own scrapes find it on the prober's
client; the log's lines find it here), so bringup's probes never show as the server's throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from tui.collectors.probes import Prober
from tui.lifecycle.reducer import LifecycleState
from tui.model import Phase, ProbeResult

from .cadence import Pace, ProbeCadence
from .grid import on_grid_after, sleep_on_grid


class ProbeLoop:
    def __init__(self, prober: Callable[[], Prober], state: Callable[[], LifecycleState], cadence: ProbeCadence, *,
                 interval_s: float, unmanaged: bool, paused: Callable[[], bool],
                 ask_release: Callable[[], Awaitable[None]], answered: Callable[[ProbeResult], None],
                 scrape_every: Callable[[], float] = lambda: 0.0) -> None:
        """`prober()`: the one to use now (it is replaced when a port forward opens); `unmanaged`: no manager
        says whether the server runs, so it is probed as if it did; `ask_release()`: asks the run's release if
        that is due (server_version.py); `scrape_every()`: how often /metrics is scraped now (the counters' age
        that still proves the run alive)."""
        self._prober = prober
        self._state = state
        self._cadence = cadence
        self._interval = interval_s
        self._unmanaged = unmanaged
        self._paused = paused
        self._ask_release = ask_release
        self._answered = answered
        self._scrape_every = scrape_every
        #: set when the operator asks for a generation now: the nap until the next probe ends at once
        self.poke = asyncio.Event()

    async def run(self) -> None:
        interval = self._interval
        cadence = self._cadence
        last_gen = 0.0
        while True:
            prober = self._prober()
            s = self._state()
            unit_running = s.unit is None or s.unit.running or self._unmanaged
            if self._paused() or not unit_running or s.phase in (Phase.FAILED, Phase.STOPPING):
                await sleep_on_grid(interval)
                continue
            await self._ask_release()  # once a run, once it has said it is ready (nothing most times round)
            if s.phase == Phase.READY:
                asked = cadence.take_asked()
                if not asked and cadence.pace(time.time(), s.phase, self._scrape_every()) is Pace.FAST:
                    self._answered(await prober.health())
                if asked or cadence.generation_due(time.time(), last_gen, s.phase):
                    g = await prober.generate()
                    last_gen = time.time()
                    self._answered(g)
                due_in = cadence.slow_s - (time.time() - last_gen)
                # the pace is looked at again every nap; a ready server's naps end on the engine's grid
                await self._nap(on_grid_after(max(0.05, min(interval * 2, due_in))))
                continue
            if s.ready_line_at is not None or not s.logs_available or s.phase == Phase.WARMUP:
                self._answered(await prober.health())
                if s.ready_line_at is not None or not s.logs_available:
                    g = await prober.generate()
                    last_gen = time.time()
                    self._answered(g)
                    if g.ok:
                        continue
            else:
                self._answered(await prober.connect())
            # not yet ready: half-second naps off the grid, readiness is seen as soon as it is proven
            loop = asyncio.get_running_loop()
            await self._nap(loop.time() + (interval / 2 if s.ready_line_at is not None else interval))

    async def _nap(self, until: float) -> None:
        """Until the next probe (`until`, on the loop's clock), or until the operator asks for one."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(until):
                await self.poke.wait()
        self.poke.clear()
