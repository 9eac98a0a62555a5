"""A one-shot picture of a deployment for `bringup status`: the same engine and reducer as the live console,
fed once from every source instead of followed."""

from __future__ import annotations

import asyncio

import httpx

from tui.engine import Engine, MetricsState
from tui.model import Phase


async def settle(w: Engine) -> None:
    await w.connect_endpoint()
    unit = await w.poll_unit() if w.manager.can_control else None
    if unit is not None and unit.running and unit.invocation:
        await w.replay_history(unit.invocation)
        await w.refresh_pids(unit)
    s = w.state
    running = unit is None or unit.running
    if running and s.phase not in (Phase.FAILED,):
        if s.ready_line_at is not None or not s.logs_available:
            w.feed(await w.prober.health())
            w.feed(await w.prober.generate())
            await w.ask_release()  # unless its log said it: SGLang's only word on its release
        else:
            w.feed(await w.prober.connect())
    if unit is not None and unit.running and w.state.phase != Phase.READY:
        # the probes took a moment: a server that stopped meanwhile failed them for that reason, not for being
        # in warmup (a `status` polled during a stop read `warmup`): the unit's state now says which
        await w.poll_unit()
    gpus = await w.fresh_gpus(max_age=0)
    if gpus is not None:
        w.gpus = gpus
    if w.state.phase == Phase.READY:
        for _ in range(2):  # a counter-based rate needs two scrapes; a gauge gives it on the first
            try:
                tp = await w.scrape_metrics()
            except (httpx.HTTPError, TimeoutError):
                break
            if w.metrics_state == MetricsState.OFF or (tp is not None and tp.tokens_per_s is not None):
                break
            await asyncio.sleep(1.0)
