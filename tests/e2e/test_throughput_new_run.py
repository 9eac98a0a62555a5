"""After a restart the throughput shown is the new run's, never the old one's as if it were (issue 51, item 7): the
engine drops the old run's figures and history on a new invocation, before the picture goes out, and the console's
panel takes them from that picture. A real engine following the simulated server (under load) while another
`bringup restart` process restarts it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.wait import until_async
from tui.config.settings import load
from tui.console.shown import Shown
from tui.engine import Engine, PhaseChanged
from tui.model import Snapshot, ThroughputSample

pytestmark = pytest.mark.slow


async def test_a_new_run_starts_with_no_throughput_of_the_old(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(sim_args=("--sim-load", "4"))
    await asyncio.to_thread(bu.bring_up)
    settings = load(str(bu.config))
    w = Engine(settings, bu.name, settings.deployments[bu.name])
    pictures: list[Snapshot] = []
    w.subscribe(lambda u: pictures.append(u.snapshot) if isinstance(u, PhaseChanged) else None)
    await w.start()
    try:
        await until_async("the old run's throughput", lambda: w.throughput is not None
                          and w.throughput.tokens_per_s is not None, 30)
        old = w.state.invocation
        shown = Shown.caught_up(w.snapshot())
        assert shown.tp is not None
        await asyncio.to_thread(bu.bring_up)
        await until_async("the new run seen", lambda: any(p.invocation not in ("", old) for p in pictures), 30)
        first_new = next(p for p in pictures if p.invocation not in ("", old))
        assert first_new.throughput is None and first_new.tps_history == (), first_new.throughput
        shown.phase_changed(first_new, acting=False)  # the console's panel, from that picture
        assert shown.tp is None and shown.tp_history == []
    finally:
        await w.close()


def test_the_panel_drops_the_old_runs_figures_on_a_new_invocation() -> None:
    """The console's part alone: a picture of another run replaces the figures the panel holds."""
    base = Shown.nothing_yet("sim", "local").snap
    shown = Shown(replace(base, invocation="run-1"))
    shown.throughput_sampled(ThroughputSample(at=1.0, tokens_per_s=100.0, source="metrics"), [(1.0, 100.0)])
    shown.phase_changed(replace(base, invocation="run-1"), acting=False)
    assert shown.tp is not None  # the same run: kept
    shown.phase_changed(replace(base, invocation="run-2"), acting=False)
    assert shown.tp is None and shown.tp_history == []
