"""Issue 51, item 7: the console at 80x24 shows what matters whole. The header keeps its last part (the mode, the
way back), the log gives no row to a horizontal scrollbar, a failure's toast leaves the log readable, and the key
bar names `i` while a failed run offers its incident record."""

from __future__ import annotations

from pathlib import Path

from tests.console.test_snapshots import feed
from tests.helpers import console_states as cs
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.app import ControlConsoleApp
from tui.model import Phase
from widgets.header import fit_title

SIZE = (80, 24)
SUB = "k26-dflash @ gpu-box  sglang-k26-dflash.service  SGLang 0.5.23  [read-only]  esc: all deployments"


def make_app(tmp: Path) -> ControlConsoleApp:
    app = ControlConsoleApp(settings_for(tmp), "sim", live=False)
    app.clock = lambda: cs.T0 + 103.0
    return app


def lines(app: ControlConsoleApp) -> list[str]:
    return [s.text for s in app.screen._compositor.render_strips()]


async def test_the_header_keeps_its_last_part(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True)(pilot)
        app.sub_title = SUB
        assert await until(pilot, lambda: "esc: all deployments" in lines(app)[0])
        head = lines(app)[0]
        assert "k26-dflash @ gpu-box" in head and "[read-only]" in head, head


def test_fit_title_shortens_the_middle_first() -> None:
    assert fit_title("bringup", "sim @ box", 60) == ("bringup", "sim @ box")
    _, sub = fit_title("bringup", SUB, 62)
    assert len(sub) <= 62 and sub.startswith("k26-dflash @ gpu-box") and sub.endswith("esc: all deployments"), sub
    _, tiny = fit_title("bringup", SUB, 30)
    assert len(tiny) <= 30 and tiny.endswith("esc: all deployments"), tiny


async def test_the_log_gives_no_row_to_a_horizontal_scrollbar(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True)(pilot)
        log = app.screen.query_one("#log")
        assert log.virtual_size.width > log.scrollable_content_region.width  # lines wider than the panel
        assert log.scrollbar_size_horizontal == 0
        assert log.scrollable_content_region.height == log.content_region.height, log.scrollable_content_region
        assert not any("▍" in ln or "▌" in ln for ln in lines(app)[17:22])


async def test_the_bar_names_the_record_key_while_a_failed_run_offers_it(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await feed(Phase.READY, gib=127.0, util=0)(pilot)
        assert " i " not in lines(app)[-1] + " "
        await feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True)(pilot)
        assert await until(pilot, lambda: "i record" in lines(app)[-1])
        bar = lines(app)[-1]
        assert "? help" in bar and "q quit" in bar and "r restart" in bar, bar
        await settled(pilot)
