"""Flags, keys and hints follow the run's release: what the flags dialog offers, what `g` writes and what a hint
tells the operator to set are what that release's parser takes (facts from the released wheels,
tui/lifecycle/presets/facts/)."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable

from tests.helpers.pilot import until
from tui.lifecycle.presets import FlagSpec
from tui.lifecycle.presets.facts import resolve
from tui.lifecycle.presets.registry import get_preset
from tui.screens.flags import FlagsScreen

SGLANG = get_preset("sglang")


class FlagsHost(App[None]):
    pass


async def open_dialog(app: App[Any], pilot: Pilot[Any], specs: list[FlagSpec], results: list[Any]) -> FlagsScreen:
    screen = FlagsScreen(specs, {"tp-size": "8"}, ["disable-cuda-graph"])
    app.push_screen(screen, results.append)
    assert await until(pilot, lambda: app.screen is screen and any(t.row_count for t in screen.query(DataTable)))
    return screen


async def test_g_on_0_5_23_sets_decode_and_prefill_graphs_off_as_one_undoable_change() -> None:
    facts = resolve("sglang", "0.5.23").facts
    specs = list(SGLANG.for_release(facts).flags)
    results: list[Any] = []
    app = FlagsHost()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_dialog(app, pilot, specs, results)
        await pilot.press("g")
        assert await until(pilot, lambda: len(screen.pending) == 2)
        assert {n: (c.value, c.remove) for n, c in screen.pending.items()} == {
            "cuda-graph-backend-decode": ("disabled", False), "cuda-graph-backend-prefill": ("disabled", False)}
        await pilot.press("u")  # one change: both undone
        assert await until(pilot, lambda: not screen.pending)
        await pilot.press("g", "g")  # on, then off again
        assert await until(pilot, lambda: not screen.pending and len(screen.history) == 2)
        await pilot.press("g", "a")
        assert await until(pilot, lambda: bool(results))
    changes = results[0]
    assert sorted((c.name, c.value) for c in changes) == [("cuda-graph-backend-decode", "disabled"),
                                                          ("cuda-graph-backend-prefill", "disabled")]


