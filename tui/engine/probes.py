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

A generation is real work the server counts like any other: the prober keeps a ledger of its generations and their
tokens, which the throughput tracker reads the server's figures with (its own scrapes find it on the prober's
client; the log's lines find it here), so bringup's probes never show as the server's throughput.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from tui.model import Phase, ProbeResult

from .cadence import Pace
from .server_version import ask_release
from .updates import ProbeAnswered

if TYPE_CHECKING:
    from .core import Engine


def _answered(engine: Engine, r: ProbeResult) -> None:
    engine.collector_errors.pop("probe", None)
    engine.feed(r)
    engine.emit(ProbeAnswered(r))


async def probe_loop(engine: Engine) -> None:
    interval = engine.settings.probe.interval_s
    last_gen = 0.0
    while True:
        engine.tput.probes = engine.prober.generated  # the prober is replaced when a port forward opens
        s = engine.state
        unit_running = s.unit is None or s.unit.running or not engine.manager.sees_run
        if engine.paused or not unit_running or s.phase in (Phase.FAILED, Phase.STOPPING):
            await asyncio.sleep(interval)
            continue
        await ask_release(engine)  # once a run, once it has said it is ready (nothing most times round)
        if s.phase == Phase.READY:
            asked = engine.cadence.take_asked()
            if not asked and engine.cadence.pace(time.time(), s.phase) is Pace.FAST:
                _answered(engine, await engine.prober.health())
            if asked or engine.cadence.generation_due(time.time(), last_gen, s.phase):
                g = await engine.prober.generate()
                last_gen = time.time()
                _answered(engine, g)
            due_in = engine.cadence.slow_s - (time.time() - last_gen)
            await _nap(engine, max(0.05, min(interval * 2, due_in)))  # the pace is looked at again every nap
            continue
        if s.ready_line_at is not None or not s.logs_available or s.phase == Phase.WARMUP:
            _answered(engine, await engine.prober.health())
            if s.ready_line_at is not None or not s.logs_available:
                g = await engine.prober.generate()
                last_gen = time.time()
                _answered(engine, g)
                if g.ok:
                    continue
        else:
            _answered(engine, await engine.prober.connect())
        await _nap(engine, interval / 2 if s.ready_line_at is not None else interval)


async def _nap(engine: Engine, seconds: float) -> None:
    """Until the next probe, or until the operator asks for one."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await engine.probe_poke.wait()
    engine.probe_poke.clear()
