"""The console on a failed run: it offers the incident record once, and its key writes the same file as `bringup
record` (a real simulated deployment, driven by keys)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.pilot import until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.model import Phase
from tui.screens.confirm import ConfirmScreen

pytestmark = pytest.mark.slow

#: a toast's text width at its narrowest (tui/console/record.py TOAST_TEXT_WIDTH)
TOAST_TEXT_WIDTH = 36


async def test_a_failed_run_offers_its_record_and_the_key_writes_it(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, scenario="dflash-graph-crash")
    app = ControlConsoleApp(settings, "sim")
    said: list[str] = []

    def notify(message: str, **_: Any) -> None:
        said.append(message)

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        try:
            assert await until(pilot, lambda: app.engine is not None and app.engine.state.unit is not None, 30)
            await pilot.press("s")
            assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            assert app.engine is not None
            assert await until(pilot, lambda: app.engine is not None and app.engine.state.phase == Phase.FAILED, 40)
            inv = app.engine.state.invocation
            offer = f"sim failed: i writes its incident record (bringup record sim {inv[:12]})"
            assert await until(pilot, lambda: offer in said), said
            await pilot.press("i")
            record = settings.state_path() / "deployments" / "sim" / "records" / f"{inv[:12]}.md"
            assert await until(pilot, record.exists), said
            # the path whole: on lines of its own, broken only after a `/`, each within a toast's width (issue 51:
            # the toast wrapped it mid-name)
            written = next(m for m in said if m.startswith("incident record written:"))
            lines = written.splitlines()
            assert lines[0] == "incident record written:" and "".join(lines[1:]) == str(record), written
            assert all(len(x) <= TOAST_TEXT_WIDTH for x in lines) and lines[-1].endswith(record.name), written
            assert all(x.endswith("/") for x in lines[1:-1]), written
            text = record.read_text()
            assert "**cuda-graph** in **" in text and "## Timeline" in text
            assert said.count(offer) == 1  # offered once a failure
        finally:
            w = app.engine
            if w is not None:
                w.action("stop")
                await w.manager.stop()
                await w.close()
                app.engine = None
