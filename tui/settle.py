"""A one-shot picture of a deployment for `bringup status`: the same engine and reducer as the live console,
fed once from every source instead of followed."""

from __future__ import annotations

import asyncio
import time

import httpx

from tui.engine import Watch
from tui.model import Phase


async def settle(w: Watch) -> None:
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
        else:
            w.feed(await w.prober.connect())
    gpus = await w.fresh_gpus(max_age=0)
    if gpus is not None:
        w.gpus = gpus
    if w.state.phase == Phase.READY:
        for _ in range(2):
            try:
                r = await w.prober.client.get("/metrics")
            except httpx.HTTPError:
                break
            if r.status_code != 200:
                w.metrics_state = "off"
                break
            tp = w._metrics.sample(r.text, time.time())
            if tp is not None and tp.tokens_per_s is not None:
                w.throughput = tp
                w.metrics_state = "on"
                break
            await asyncio.sleep(1.0)
