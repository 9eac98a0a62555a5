"""The lifecycle panel: durations in one notation, what a bring-up is doing now, STALLED as the state, and the
phase, failure and hint first when the terminal is small."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.helpers import console_states as cs
from tests.helpers.pilot import until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.engine.updates import PhaseChanged
from tui.model import Phase
from widgets.lifecycle import LifecyclePanel


async def test_stalled_is_the_badge_and_names_the_last_line(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    app.clock = lambda: cs.T0 + 103.0
    shard = "Loading safetensors checkpoint shards:  40% Completed | 26/64 [00:41<01:00,  1.58s/it]"
    snap = replace(cs.snapshot(Phase.LOADING, stalled=71.0), latest_line=shard)
    async with app.run_test(size=(120, 36)) as pilot:
        app.post_message(EngineUpdated(PhaseChanged(snap)))
        panel = app.query_one(LifecyclePanel)
        await pilot.wait_for_scheduled_animations()
        assert await until(pilot, lambda: "STALLED" in str(panel.query_one("#phase-big").render()))
        assert str(panel.query_one("#phase-big").render()).strip() == "LOADING · STALLED 1m11s"
        assert panel.query_one("#phase-big").has_class("phase-stalled")
        detail = str(panel.query_one("#phase-detail").render())
        assert "\nlast line: 40% 26/64 Loading safetensors checkpoint" in detail  # one row: the figures first
        assert "STALLED:" not in detail  # the state is the badge, not a note under it


async def test_loading_shows_what_it_is_doing_now(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    app.clock = lambda: cs.T0 + 103.0
    snap = replace(cs.snapshot(Phase.LOADING), latest_line="Load weight begin. avail mem=137.29 GB")
    async with app.run_test(size=(120, 36)) as pilot:
        app.post_message(EngineUpdated(PhaseChanged(snap)))
        detail = app.query_one("#phase-detail")
        assert await until(pilot, lambda: "Load weight" in str(detail.render()))
        assert "› Load weight begin. avail mem=137.29 GB" in str(detail.render())


async def test_at_80x24_the_failure_and_its_hint_are_in_view(tmp_path: Path) -> None:
    """The DFLASH crash at 80x24: the kind, the exception and the whole hint are on screen without scrolling."""
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    app.clock = lambda: cs.T0 + 103.0
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(EngineUpdated(PhaseChanged(cs.snapshot(Phase.FAILED, failure=cs.FAILURE))))
        failure = app.query_one("#failure")
        assert await until(pilot, lambda: failure.display and failure.region.height > 0)
        panel = app.query_one(LifecyclePanel)
        assert panel.scroll_y == 0
        inner = panel.content_region
        assert failure.region.y >= inner.y and failure.region.bottom <= inner.bottom, (failure.region, inner)
        rows = str(failure.render()).splitlines()
        assert rows[0].startswith("cuda-graph in warmup") and any(r.startswith("hint:") for r in rows)


