"""Issue 28, item 14: every size. The overview gives room by priority (at 80 columns the note -- stalled, another
bringup at work, the host down -- and tokens/s survive, where the phase and failure columns used to keep ten columns
of padding), its key bar keeps help and quit, the help scrolls so that every line can be reached at 80x24, toasts
wrap within the screen, and a count is never followed by the wrong number ("1 configurations")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.containers import VerticalScroll

from tests.helpers.console_app import screen_text
from tests.helpers.fleet_states import NOW, ROWS, settings
from tests.helpers.pilot import settled, until
from tui.console.control import ControlConsoleApp
from tui.console.overview import FLEET_SCREEN
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from widgets.fleet import FleetTable

SIZES = [(80, 24), (120, 40)]
IDS = ["80x24", "120x40"]


def overview(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> ControlConsoleApp:
    app = ControlConsoleApp(settings(tmp), "sim-a", live=False, fleet=[r.name for r in ROWS])
    app.clock = lambda: NOW
    monkeypatch.setattr(app, "fleet_rows", lambda: list(ROWS))
    return app


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
    app = overview(tmp_path, monkeypatch)
    async with app.run_test(size=size, notifications=True) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        app.notify(CAUSE, title="sim-a: cannot read its flags", severity="error", timeout=30, markup=False)
        app.notify(OTHER, title="sim-a: not restarted: flags changed meanwhile", severity="warning", timeout=30,
                   markup=False)
        app.notify(REFUSED, title="sim-a: restart refused", severity="warning", timeout=30, markup=False)
        assert await until(pilot, lambda: len(app.screen.query("Toast")) == 3)
        await settled(pilot)
        screen = app.screen.region
        for toast in app.screen.query("Toast"):  # Textual's toasts, by their type's name
            r = toast.region
            assert r.width > 0 and r.x >= 0 and r.y >= 0 and r.bottom <= screen.bottom, (r, screen)
        shown = words_on_screen(app)
        for word in (CAUSE + " " + OTHER + " " + REFUSED).split():
            assert word in shown, word
