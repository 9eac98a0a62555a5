"""Issue 51: at 80x24 a failure's toast covered most of the log it was about. Below 100 columns the console's
toasts keep to the right half of the screen (over the throughput panel), so the log stays whole; a toast's text
width there is what the record's path is broken to (tui/console/record.py TOAST_TEXT_WIDTH)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.console_app import console, failed_own_restart, feed
from tests.helpers.pilot import settled, until
from tui.console.messages import RestartFinished
from tui.console.record import TOAST_TEXT_WIDTH
from tui.model import Phase


@pytest.mark.parametrize("size", [(80, 24), (99, 30)], ids=["80x24", "99x30"])
async def test_a_failures_toasts_leave_the_log_whole(tmp_path: Path, size: tuple[int, int]) -> None:
    app, w = console(tmp_path)  # not live: the picture is the one fed, no engine's update races it
    async with app.run_test(size=size, notifications=True) as pilot:
        await feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True)(pilot)
        # the two toasts a run seen failing brings: the record's offer (as record_offer words it) and the start's end
        app.notify("sim failed: i writes its incident record (bringup record sim 3f9c2a1be0d8)", timeout=30,
                   markup=False)
        app.post_message(RestartFinished(failed_own_restart(), "start", "s"))
        shown = app.screen.query("Toast")
        assert await until(pilot, lambda: len(app.screen.query("Toast")) >= 2), [str(t.region) for t in shown]
        await settled(pilot)
        log = app.screen.query_one("#log").region
        for toast in app.screen.query("Toast"):
            assert not toast.region.overlaps(log), (toast.region, log)
            assert toast.content_region.width >= TOAST_TEXT_WIDTH, toast.content_region
    await w.close()


async def test_a_wide_console_keeps_its_wide_toasts(tmp_path: Path) -> None:
    """From 100 columns the log is wide enough: a toast takes up to 75 % of the width, as everywhere else."""
    app, w = console(tmp_path)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        app.notify("x " * 200, title="long", timeout=30)
        assert await until(pilot, lambda: len(app.screen.query("Toast")) == 1)
        await settled(pilot)
        assert app.screen.query_one("Toast").region.width >= 60  # Textual's own width, not the narrow half
    await w.close()
