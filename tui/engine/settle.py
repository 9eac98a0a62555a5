"""A one-shot picture of a deployment for `bringup status`: the same engine and reducer as the live console,
fed once from every source instead of followed."""

from __future__ import annotations

import asyncio
import contextlib

import httpx

from tui.engine.core import Engine
from tui.engine.throughput import MetricsState
from tui.managers import ManagerError
from tui.model import Phase, UnitState
from tui.transport import TransportError


async def _read_run(w: Engine) -> UnitState | None:
    """The unit, and the log of its run so far (vLLM states its release there, SGLang its ready line)."""
    await w.connect_endpoint()
    unit = await w.poll_unit() if w.manager.can_control else None
    if unit is not None and unit.running and unit.invocation:
        await w.replay_history(unit.invocation)
    return unit


async def _probe(w: Engine, unit: UnitState | None, *, generate: bool) -> None:
    """A run that said it is ready (or one with no log to say so) is probed and asked its release over HTTP
    (SGLang's only word on it); one still starting is only connected to (`generate`: the probes too, as `status`
    shows them; without, only what the release needs)."""
    s = w.state
    if not (unit is None or unit.running) or s.phase == Phase.FAILED:
        return
    if s.ready_line_at is not None or not s.logs_available:
        if generate or s.ready_line_at is None:  # no log: only a generation proves the run ready
            w.feed(await w.prober.health())
            w.feed(await w.prober.generate())
        await w.ask_release()  # unless its log said it
    elif generate:
        w.feed(await w.prober.connect())


async def learn_release(w: Engine) -> None:
    """The running server's release, learnt as `status` learns it (its log, else its HTTP answer) for a front end
    that reads the engine once instead of following the run (`bringup flags`): one server, one answer, and the
    flags, keys and `--set` words of that release (issue 51: `flags` said "release not said yet" and put `g` on
    another flag than the console did). Nothing when the host or the server cannot be reached: the newest known
    release's flags are offered, said as such."""
    with contextlib.suppress(TransportError, ManagerError, httpx.HTTPError, OSError):
        await _probe(w, await _read_run(w), generate=False)


async def running_release(w: Engine) -> None:
    """Learn the running server's release for an engine about to plan a change before it follows the run
    (`restart --set`, `start --set`, `sweep`): the flags a change may name are that release's (issue 51: they were
    validated against the newest known release's, refusing a flag the running 0.5.18 takes). Read by a look-alike
    engine on the same transport, so that `w` follows the run's log once, from its start, when it is started; the
    release goes to `w.learned_release`, which the run's own word replaces once it says it."""
    if w.state.release is not None or w.dep.multinode:
        return
    look = Engine(w.settings, w.name, w.dep, transport=w.transport)
    try:
        await learn_release(look)
    finally:
        await look.close()
    if look.state.release is not None:
        w.learned_release = look.state.release.version


async def settle(w: Engine) -> None:
    unit = await _read_run(w)
    if unit is not None and unit.running and unit.invocation:
        await w.refresh_pids(unit)
    await _probe(w, unit, generate=True)
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
