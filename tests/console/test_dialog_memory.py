"""A dialog opened and closed all day keeps nothing of what it drew: the sweep view built afresh (as for a new
sweep), its charts and tables, and then gone. Textual keeps gone widgets' style caches (its issue #6665) and plotext's
widget stays subscribed to the theme signal, which held every chart ever drawn: the console grew by 1.2 MiB at each
opening of the sweep view (1.6 MiB a minute in an hour-long soak). Measured here with tracemalloc over several
openings after a warm-up, against a bound far under one opening's old cost."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from tests.helpers.pilot import until
from tests.helpers.simdeploy import settings_for
from tests.helpers.sweep_files import full_sweep
from tui.console.viewer import ConsoleApp
from tui.screens.sweep import SweepScreen
from widgets.plot import Plot

#: what one opening may keep, at most: Textual's own bounded caches (was 1,216 KiB before the fix, 54 measured after)
KEPT_PER_OPENING_KIB = 250


async def test_a_sweep_view_opened_and_closed_keeps_nothing_of_what_it_drew(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    d = settings.state_path() / "sweeps" / "sim-20250101T000000Z"
    full_sweep(d)
    app = ConsoleApp(settings, "sim", live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        async def open_and_close() -> None:
            view = SweepScreen(d)  # built afresh each time, as for a sweep the console has not shown before
            app.push_screen(view)
            assert await until(pilot, lambda: app.screen is view and view.updates >= 1)
            await pilot.pause()
            view.dismiss(None)
            assert await until(pilot, lambda: not isinstance(app.screen, SweepScreen) and not view.is_attached)

        for _ in range(2):  # warm-up: Textual's and our caches of what does not change
            await open_and_close()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            n = 6
            for _ in range(n):
                await open_and_close()
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        kept = sum(s.size_diff for s in after.compare_to(before, "filename")) / n / 1024
        # the last view's charts are unmounted once the removal has run its course; none is kept after that
        def no_chart_alive() -> bool:
            gc.collect()
            return not any(isinstance(o, Plot) for o in gc.get_objects())

        assert await until(pilot, no_chart_alive), "a chart outlived its view"
        assert kept < KEPT_PER_OPENING_KIB, f"{kept:.0f} KiB kept per opening"
