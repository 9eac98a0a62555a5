"""Issue 51, item 7: the console at 80x24 shows what matters whole. The header keeps its last part (the mode, the
way back), the log gives no row to a horizontal scrollbar, a failure's toast leaves the log readable, and the key
bar names `i` while a failed run offers its incident record."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import console_states as cs
from tests.helpers.console_app import feed, screen_lines
from tests.helpers.console_states import SUB
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.model import Phase

SIZE = (80, 24)


def make_app(tmp: Path) -> ControlConsoleApp:
    app = ControlConsoleApp(settings_for(tmp), "sim", live=False)
    app.clock = lambda: cs.T0 + 103.0
    return app


async def test_the_header_keeps_its_last_part(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True)(pilot)
        app.sub_title = SUB
        assert await until(pilot, lambda: "esc: all deployments" in screen_lines(app)[0])
        head = screen_lines(app)[0]
        assert "k26-dflash @ gpu-box" in head and "[read-only]" in head, head


async def test_the_log_gives_no_row_to_a_horizontal_scrollbar(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True)(pilot)
        log = app.screen.query_one("#log")
        assert log.virtual_size.width > log.scrollable_content_region.width  # lines wider than the panel
        assert log.scrollbar_size_horizontal == 0
        assert log.scrollable_content_region.height == log.content_region.height, log.scrollable_content_region
        assert not any("▍" in ln or "▌" in ln for ln in screen_lines(app)[17:22])


async def test_the_bar_names_the_record_key_while_a_failed_run_offers_it(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await feed(Phase.READY, gib=127.0, util=0)(pilot)
        assert " i " not in screen_lines(app)[-1] + " "
        await feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True)(pilot)
        assert await until(pilot, lambda: "i record" in screen_lines(app)[-1])
        bar = screen_lines(app)[-1]
        assert "? help" in bar and "q quit" in bar and "r restart" in bar, bar
        await settled(pilot)
