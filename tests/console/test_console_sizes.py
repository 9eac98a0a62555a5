"""Issue 28, item 14: every size. The overview gives room by priority (at 80 columns the note -- stalled, another
bringup at work, the host down -- and tokens/s survive, where the phase and failure columns used to keep ten columns
of padding), its key bar keeps help and quit, the help scrolls so that every line can be reached at 80x24, toasts
wrap within the screen, and a count is never followed by the wrong number ("1 configurations")."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from textual.containers import VerticalScroll

from tests.helpers.config_toml import ConfigFile
from tests.helpers.pilot import settled, until
from tests.helpers.ports import free_port
from tui.app import ControlConsoleApp
from tui.config import HostConfig, Settings, load, parse_deployment
from tui.console.overview import FLEET_SCREEN
from tui.model import Phase
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from widgets.fleet import Columns, FleetRow, FleetTable

NOW = 1_000_000.0
SIZES = [(80, 24), (120, 40)]
IDS = ["80x24", "120x40"]

ROWS = [
    FleetRow("sim-a", "gpu-a", Phase.READY, since=NOW - 600, mem_used_mib=600_000, mem_total_mib=1_150_000,
             util_pct=87.0, tokens_per_s=2400.0),
    FleetRow("sim-b", "gpu-a", Phase.FAILED, since=NOW - 30, failure="cuda-graph"),
    FleetRow("sim-c", "gpu-b", Phase.LOADING, since=NOW - 95, stalled=True,
             note="STALLED 1m11s: no log line or GPU memory change"),
    FleetRow("sim-d", "gpu-b", Phase.GRAPH_CAPTURE, since=NOW - 20,
             note="another bringup is at work: restart by alice@laptop (pid 4242)"),
    FleetRow("sim-e", "gpu-c", Phase.UNKNOWN, note="reconnecting (attempt 2): gpu-c: SSH connection refused",
             host_down="reconnecting (attempt 2): gpu-c: SSH connection refused"),
]


def settings(tmp: Path) -> Settings:
    hosts = {h: HostConfig(gpu_source="none") for h in ("gpu-a", "gpu-b", "gpu-c")}
    command = [sys.executable, "-c", "pass"]
    deps = {r.name: parse_deployment({"host": r.host, "manager": "process", "command": command,
                                      "endpoint": f"http://127.0.0.1:{free_port()}"})
            for r in ROWS}
    return load(str(ConfigFile(state_dir=tmp / "state", hosts=hosts, deployments=deps).write(tmp / "config.toml")))


def overview(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> ControlConsoleApp:
    app = ControlConsoleApp(settings(tmp), "sim-a", live=False, fleet=[r.name for r in ROWS])
    app.clock = lambda: NOW
    monkeypatch.setattr(app, "fleet_rows", lambda: list(ROWS))
    return app


def screen_text(app: ControlConsoleApp) -> str:
    return "\n".join(s.text for s in app.screen._compositor.render_strips())


def words_on_screen(app: ControlConsoleApp) -> str:
    """The screen's words in order, borders and scrollbars left out: a wrapped line reads as one."""
    return " ".join(re.sub(r"[│█▀▄▁▂▃▅▆▇╭╮╰╯─▌▐]", " ", screen_text(app)).split())


def table(app: ControlConsoleApp) -> FleetTable:
    return app.get_screen(FLEET_SCREEN).query_one(FleetTable)


def row_line(text: str, name: str) -> str:
    return next(ln for ln in text.splitlines() if f" {name} " in ln)


# ---------------------------------------------------------------------------------------------------- the overview


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_the_overview_gives_the_note_and_tokens_room_by_priority(
        size: tuple[int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = overview(tmp_path, monkeypatch)
    async with app.run_test(size=size) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(table(app).shown) == 5)
        await settled(pilot)
        text = screen_text(app)
        header = next(ln for ln in text.splitlines() if "NAME" in ln)
        for label in ("NAME", "HOST", "PHASE", "FAILURE", "TOK/S", "NOTE"):
            assert f" {label}" in header, header  # whole: never "T…"
        assert "T…" not in text
        assert "2400" in row_line(text, "sim-a") and "cuda-graph" in row_line(text, "sim-b")
        assert "GRAPH-CAPTURE" not in text and "graph-capture" in row_line(text, "sim-d")
        # the notes: stalled, another bringup at work, the host down, each begun where it can be read
        assert "STALLED 1m11s: no log" in row_line(text, "sim-c"), text
        assert "another bringup is at" in row_line(text, "sim-d"), text
        assert "reconnecting (attempt" in row_line(text, "sim-e"), text
        if size[0] >= 120:  # room for every column, the figures included
            for label in ("AGE", "GPU MEM", "UTIL"):
                assert label in header, header
            assert "10m" in row_line(text, "sim-a") and "87%" in row_line(text, "sim-a")
            assert "another bringup is at work: restart by" in row_line(text, "sim-d")
        # the key bar keeps help and quit, each key whole
        bar = text.splitlines()[-1]
        assert "? help" in bar and "q quit" in bar and "r restart" in bar, bar


def test_columns_give_way_in_order_and_the_note_keeps_its_room() -> None:
    full = Columns.fit(ROWS, 200)
    assert full.gap == 2 and all((full.age, full.util, full.mem, full.tps, full.failure))
    assert full.phase == len("graph-capture") and full.failure == len("cuda-graph")  # as wide as their cells
    narrow = Columns.fit(ROWS, 76)  # 80 columns, less the border and padding
    assert narrow.note >= 22 and narrow.util == 0 and narrow.tps and narrow.failure and narrow.host
    tiny = Columns.fit(ROWS, 50)
    assert tiny.note >= 22 and tiny.name and tiny.phase and not tiny.tps
    # a column nothing fills goes before one with figures
    idle = [FleetRow(r.name, r.host, Phase.STOPPED, since=NOW - 5, note=r.note) for r in ROWS]
    cols = Columns.fit(idle, 76)
    assert cols.age and not (cols.failure or cols.mem or cols.util or cols.tps), cols


# ---------------------------------------------------------------------------------------------------- help


LAST = "Esc closes this."


async def scroll_help_to_its_end(app: ControlConsoleApp, pilot: object, height: int) -> None:
    assert await until(pilot, lambda: isinstance(app.screen, HelpScreen))  # type: ignore[arg-type]
    await settled(pilot)
    first = words_on_screen(app)
    assert "bringup keys" in first
    if height >= 40:
        assert LAST in first  # no scrolling needed
    for _ in range(3):
        await pilot.press("pagedown")  # type: ignore[attr-defined]
    await pilot.press("end")  # type: ignore[attr-defined]
    await until(pilot, lambda: LAST in words_on_screen(app))
    assert LAST in words_on_screen(app), screen_text(app)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_every_line_of_the_help_can_be_reached(size: tuple[int, int], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    app = overview(tmp_path, monkeypatch)
    async with app.run_test(size=size) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(table(app).shown) == 5)
        await pilot.press("question_mark")  # the overview's help
        await scroll_help_to_its_end(app, pilot, size[1])
        body = app.screen.query_one(VerticalScroll)
        assert body.max_scroll_y == 0 or body.scroll_y == body.max_scroll_y
        await pilot.press("escape")
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        await pilot.press("enter")  # the console's help, longer
        assert await until(pilot, lambda: not isinstance(app.screen, FleetScreen))
        await pilot.press("question_mark")
        await scroll_help_to_its_end(app, pilot, size[1])
        await pilot.press("escape")
        assert await until(pilot, lambda: not isinstance(app.screen, HelpScreen))


# ---------------------------------------------------------------------------------------------------- toasts


CAUSE = ("gpu-a: SSH connection refused (ssh exited 255): the host is down or sshd is not running; "
         "nothing was changed; press r to try again once `ssh gpu-a` works from here")
OTHER = ("the flags changed after the dialog opened, so nothing was done (it would have undone that change): "
         "--cuda-graph-max-bs 8 -> 16; --mem-fraction-static 0.8 -> 0.85\npress r to decide again over the flags "
         "as they are now")
REFUSED = ("refused: another bringup is already restarting this deployment: restart by alice@laptop (pid 4242) "
           "since 12:01:02\nnothing was changed: the lifecycle panel follows its run; press r again after it, if "
           "still needed")


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_three_toasts_wrap_and_stay_whole_on_the_screen(size: tuple[int, int], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets._toast import Toast

    app = overview(tmp_path, monkeypatch)
    async with app.run_test(size=size, notifications=True) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        app.notify(CAUSE, title="sim-a: cannot read its flags", severity="error", timeout=30, markup=False)
        app.notify(OTHER, title="sim-a: not restarted: flags changed meanwhile", severity="warning", timeout=30,
                   markup=False)
        app.notify(REFUSED, title="sim-a: restart refused", severity="warning", timeout=30, markup=False)
        assert await until(pilot, lambda: len(app.screen.query(Toast)) == 3)
        await settled(pilot)
        screen = app.screen.region
        for toast in app.screen.query(Toast):
            r = toast.region
            assert r.width > 0 and r.x >= 0 and r.y >= 0 and r.bottom <= screen.bottom, (r, screen)
        shown = words_on_screen(app)
        for word in (CAUSE + " " + OTHER + " " + REFUSED).split():
            assert word in shown, word


# ---------------------------------------------------------------------------------------------------- plurals


def test_a_count_says_its_noun_in_the_right_number() -> None:
    from tui.words import noun, plural

    assert plural(1, "configuration") == "1 configuration" and plural(0, "configuration") == "0 configurations"
    assert plural(3, "warmup request") == "3 warmup requests" and plural(1, "pending flag change") == \
        "1 pending flag change"
    assert plural(2, "entry", "entries") == "2 entries" and plural(1234, "line") == "1,234 lines"
    assert noun(1, "pid") == "pid" and noun(2, "pid") == "pids"
