"""Pilot tests of the console's keys on fixed data (no server): following the log with End, wrapping without losing
the place, the errors view saying what it hides, the flags dialog, a maximized panel, the deployment picker, the
read-only keys and the key bar at 80 columns."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList, Static

from tests.helpers import console_states as cs
from tests.helpers.console_app import screen_text, shown
from tests.helpers.pilot import until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.console.viewer import ConsoleApp
from tui.engine.updates import LogsRead, PhaseChanged
from tui.lifecycle.flags import FlagChange
from tui.lifecycle.lines import line_kinds
from tui.lifecycle.presets import get_preset
from tui.model import LogLine, Phase
from tui.screens.flags import FlagsScreen
from widgets.error_log import HIDDEN_COUNT_EVERY_S, ErrorLog


def logs_read(lines: list[str]) -> EngineUpdated:
    """What the engine's listener posts for a batch of log lines."""
    return EngineUpdated(LogsRead(tuple(LogLine(at=1.0, text=t) for t in lines), line_kinds(lines)))


def top_row(log: ErrorLog) -> str:
    view = log.log_view
    return view.lines[round(view.scroll_y)]


# ---------------------------------------------------------------------------------------------------- the log


async def test_end_follows_again_at_once_while_lines_keep_arriving(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        view = log.log_view
        sent = 0

        def send(k: int) -> None:
            nonlocal sent
            app.post_message(logs_read([f"line {sent + i}" for i in range(k)]))
            sent += k

        await pilot.press("e")  # all lines
        send(500)
        assert await until(pilot, lambda: view.line_count == 500 and view.is_vertical_scroll_end)
        await pilot.press("pageup")
        assert await until(pilot, lambda: not log.following)
        send(57)
        assert await until(pilot, lambda: log.unseen == 57)
        assert "57 new" in str(log.border_subtitle)
        burst = app.set_interval(1 / 60, lambda: send(20))  # a batch every frame, End pressed in the middle
        await pilot.press("end")
        assert log.following and log.unseen == 0 and "new" not in str(log.border_subtitle)
        for _ in range(3):  # the view stays at the newest line while they keep coming
            at = sent
            assert await until(pilot, lambda: sent > at + 100 and view.line_count == sent)  # noqa: B023
            assert log.following and log.unseen == 0 and "new" not in str(log.border_subtitle)
        burst.stop()
        assert await until(pilot, lambda: view.line_count == sent and view.is_vertical_scroll_end)
        assert view.lines[-1] == f"line {sent - 1}"


async def test_pageup_holds_the_view_while_a_full_buffer_drops_its_oldest_lines(tmp_path: Path,
                                                                                monkeypatch: Any) -> None:
    """During a burst the buffer is full and every new line drops the oldest: a view scrolled back must stay on the
    lines it shows (as `less` does), not slide down with the positions."""
    import widgets.log_buffer as lb

    monkeypatch.setattr(lb, "LINES", 200)
    monkeypatch.setattr(lb, "ERRORS", 100)
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        view = log.log_view
        sent = 0

        def send(k: int) -> None:
            nonlocal sent
            app.post_message(logs_read([f"line {sent + i}" for i in range(k)]))
            sent += k

        await pilot.press("e")
        send(400)
        assert await until(pilot, lambda: view.lines and view.lines[-1] == "line 399" and view.is_vertical_scroll_end)
        await pilot.press("pageup")
        assert await until(pilot, lambda: not log.following)
        held = top_row(log)
        for _ in range(4):
            at = sent
            send(30)
            assert await until(pilot, lambda: view.lines[-1] == f"line {at + 29}")  # noqa: B023
            assert top_row(log) == held, (held, top_row(log))
        assert log.unseen == 120 and not log.following


LONG = "x" * 150


async def test_w_keeps_the_last_line_in_view_while_following(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        view = log.log_view
        await pilot.press("e")
        app.post_message(logs_read([f"n{i} {LONG}" for i in range(300)] + ["the crash: CUDA error"]))
        assert await until(pilot, lambda: view.line_count == 301 and view.is_vertical_scroll_end)
        for wrapped in (True, False, True):
            await pilot.press("w")
            assert await until(pilot, lambda: log.wrap is wrapped)  # noqa: B023
            assert view.line_count > 301 if wrapped else view.line_count == 301
            assert await until(pilot, lambda: view.is_vertical_scroll_end)
            assert log.following and view.lines[-1] == "the crash: CUDA error"
            assert "the crash: CUDA error" in screen_text(app)


async def test_w_keeps_the_line_at_the_top_in_view_when_scrolled_back(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        view = log.log_view
        await pilot.press("e")
        app.post_message(logs_read([f"n{i} {'ERROR ' if i % 3 == 0 else ''}{LONG}" for i in range(300)]))
        assert await until(pilot, lambda: view.line_count == 300)
        view.scroll_to(y=120, animate=False, immediate=True)  # the user scrolls back
        assert await until(pilot, lambda: not log.following)
        for wrapped in (True, False):
            await pilot.press("w")
            assert await until(pilot, lambda: log.wrap is wrapped)  # noqa: B023
            assert top_row(log).startswith("n120 "), (view.scroll_y, top_row(log))
            assert not log.following
        # the errors/all toggle keeps the place too, where the line is in both views
        for show_all in (False, True):
            await pilot.press("e")
            assert await until(pilot, lambda: log.show_all is show_all)  # noqa: B023
            assert top_row(log).startswith("n120 ") and not log.following, top_row(log)


async def test_w_keeps_the_place_in_a_full_buffer_whose_folded_rows_the_log_cannot_all_hold(tmp_path: Path) -> None:
    """Folded, a full buffer of long lines makes more rows than the Log keeps: it drops the oldest, and the place
    is counted from the newest line back."""
    from widgets.log_buffer import LINES

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        view = log.log_view
        await pilot.press("e")
        rows = log.rows
        for start in range(0, rows, 5_000):
            app.post_message(logs_read([f"n{i} {LONG}" for i in range(start, min(rows, start + 5_000))]))
        # unfolded, the view holds a row for each line the buffer holds: its newest LINES
        assert await until(pilot, lambda: view.line_count == LINES and view.lines[-1].startswith(f"n{rows - 1} "))
        view.scroll_to(y=LINES - 200, animate=False, immediate=True)
        assert await until(pilot, lambda: not log.following)
        want = top_row(log).split()[0]
        for wrapped in (True, False, True):
            await pilot.press("w")
            assert await until(pilot, lambda: log.wrap is wrapped, 30)  # noqa: B023
            assert top_row(log).startswith(f"{want} "), (want, top_row(log))
            # folded, the buffer's newest lines make more rows than the Log keeps; unfolded, one row a line
            assert view.line_count == (rows if wrapped else LINES)


async def test_the_errors_view_says_how_many_lines_it_hides_and_which_key_shows_them(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        clock = [1000.0]
        log.clock = lambda: clock[0]
        note = app.query_one("#log-empty", Static)
        assert "errors only" in str(log.border_title)
        app.post_message(logs_read([f"[2026-06-02 08:00:20 TP0] Load weight {i}" for i in range(1234)]))
        assert await until(pilot, lambda: "1,234" in str(note.render()))  # a count appearing: at once
        text = str(note.render())
        assert "hidden" in text and "e:" in text, text
        # the note says it; the border does not as well while the note shows: its words repaint the whole panel
        assert "hidden" not in str(log.border_title), log.border_title
        # a count that moves follows every HIDDEN_COUNT_EVERY_S, not every tick
        app.post_message(logs_read(["more progress"] * 10))
        assert await until(pilot, lambda: len(log.entries) == 1244 and not log.has_due)
        log.check_follow()  # what the refresh tick does
        assert "1,234" in str(note.render())
        clock[0] += HIDDEN_COUNT_EVERY_S
        assert await until(pilot, lambda: "1,244" in str(note.render()))
        # an error on view: the note goes, and the border counts what is left out
        app.post_message(logs_read(["[2026-06-02 08:00:21 TP0] ERROR: something broke"]))
        assert await until(pilot, lambda: not note.display and "1,244 hidden" in str(log.border_title))
        await pilot.press("e")
        assert await until(pilot, lambda: not note.display and "all lines" in str(log.border_title))
        assert "hidden" not in str(log.border_title)
        await pilot.press("slash", *"[/]", "enter")  # typed text in the border: shown as typed, not read as markup
        assert await until(pilot, lambda: log.filter_text == "[/]")
        assert "/[/]" in screen_text(app), screen_text(app)


# ---------------------------------------------------------------------------------------------------- flags


async def open_flags_dialog(app: ConsoleApp, pilot: Pilot[Any], results: list[Any],
                            values: dict[str, str | None] | None = None) -> FlagsScreen:
    specs = list(get_preset("sglang").flags)
    screen = FlagsScreen(specs, values or {"tp-size": "8", "mem-fraction-static": "0.85"}, ["disable-cuda-graph"])
    app.push_screen(screen, results.append)
    assert await until(pilot, lambda: app.screen is screen and any(t.row_count for t in screen.query(DataTable)))
    return screen


@pytest.mark.parametrize("values", [None, {"speculative-algorithm": "DFLASH", "tp-size": "8",
                                             "speculative-draft-model-path": "z-lab/Kimi-K2.6-DFlash-draft-model"}],
                         ids=["short-values", "a-long-value"])
async def test_the_flags_help_column_is_wrapped_at_words_within_the_dialog(
        tmp_path: Path, values: dict[str, str | None] | None) -> None:
    """At 80x24, even with a long value (a draft model's path) the columns fit the dialog: the value column gives
    way, and the help is folded at words inside the screen, not cut off at its edge."""
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        flags = await open_flags_dialog(app, pilot, [], values)
        table = flags.query_one(DataTable)
        about = table.ordered_columns[-1]
        assert await until(pilot, lambda: sum(c.get_render_width(table) for c in table.ordered_columns)
                           <= table.scrollable_content_region.width)
        for f in flags.specs:
            cell = table.get_cell(f.name, about.key)
            lines = str(cell).splitlines()
            assert " ".join(lines) == f.help, (f.name, lines)  # every word, none cut
            assert all(cell_len(x) <= about.width for x in lines), (lines, about.width)
        first = str(table.get_cell(flags.specs[0].name, about.key)).splitlines()
        assert len(first) > 1 and first[1] in screen_text(app)  # the first flag's help, folded, on screen whole


async def test_the_value_editor_names_its_flag(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        flags = await open_flags_dialog(app, pilot, [])
        table = flags.query_one(DataTable)
        table.move_cursor(row=table.get_row_index("mem-fraction-static"))
        await pilot.press("enter")
        assert await until(pilot, lambda: "value for --mem-fraction-static" in screen_text(app))
        await pilot.press("escape")
        assert await until(pilot, lambda: "value for --mem-fraction-static" not in screen_text(app))
        assert app.screen is flags


async def test_u_undoes_the_last_flag_change_only(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        flags = await open_flags_dialog(app, pilot, [])
        await pilot.press("g", "m")  # disable-cuda-graph and enable-metrics on
        assert set(flags.pending) == {"disable-cuda-graph", "enable-metrics"}
        await pilot.press("u")
        assert set(flags.pending) == {"disable-cuda-graph"}
        assert await until(pilot, lambda: any("undone" in n and "enable-metrics" in n for n in shown(app)))
        await pilot.press("u")
        assert flags.pending == {}
        await pilot.press("u")
        assert await until(pilot, lambda: any("nothing to undo" in n for n in shown(app)))
        assert "undo last" in screen_text(app).lower()


async def test_escape_says_which_pending_changes_it_drops_and_apply_with_none_says_so(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        results: list[list[FlagChange] | None] = []
        flags = await open_flags_dialog(app, pilot, results)
        await pilot.press("a")
        assert await until(pilot, lambda: any("nothing to apply" in n for n in shown(app)))
        assert app.screen is flags and results == []  # still open: nothing was applied
        await pilot.press("g", "m")
        await pilot.press("escape")
        assert await until(pilot, lambda: results == [None])
        dropped = [n for n in shown(app) if "2 pending flag changes dropped" in n]
        assert dropped and "--disable-cuda-graph" in dropped[0], shown(app)  # and which ones


# ---------------------------------------------------------------------------------------------------- the console


async def test_a_maximized_panel_says_esc_restores_it(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        app.post_message(logs_read(["a line"]))
        assert await until(pilot, lambda: app.focused is log.log_view)
        app.screen.action_maximize()
        assert await until(pilot, lambda: app.screen.maximized is log)  # the whole panel, with its border
        assert "Esc to restore" in str(log.border_subtitle)
        await pilot.press("escape")
        assert await until(pilot, lambda: app.screen.maximized is None)
        assert "Esc to restore" not in str(log.border_subtitle)
        gpus = app.query_one("#gpus")
        gpus.focus()
        await pilot.pause()
        app.screen.action_maximize()
        assert await until(pilot, lambda: app.screen.maximized is gpus)
        assert "Esc to restore" in str(gpus.border_subtitle)
        await pilot.press("escape")
        assert await until(pilot, lambda: app.screen.maximized is None)
        assert "Esc to restore" not in str(gpus.border_subtitle)


async def test_the_deployment_picker_shows_each_deployments_phase(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    settings.deployments["other"] = settings.deployments["sim"].model_copy()
    app = ControlConsoleApp(settings, "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        app.post_message(EngineUpdated(PhaseChanged(dataclasses.replace(cs.snapshot(Phase.READY), deployment="sim"))))
        assert await until(pilot, lambda: app.shown.snap.phase == Phase.READY)
        await pilot.press("d")
        assert await until(pilot, lambda: bool(app.screen.query("#picker")))
        picker = app.screen.query_one("#picker", OptionList)
        prompts = {picker.get_option_at_index(i).id: str(picker.get_option_at_index(i).prompt)
                   for i in range(picker.option_count)}
        assert "ready" in prompts["sim"], prompts
        assert "not watched" in prompts["other"], prompts


async def test_read_only_keys_say_they_are_off(tmp_path: Path) -> None:
    app = ConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for key, what in (("r", "restart"), ("f", "flag changes"), ("s", "start/stop")):
            await pilot.press(key)
            assert await until(pilot, lambda: any(n.startswith("read-only:") and what in n  # noqa: B023
                                                  for n in shown(app))), shown(app)
        assert len(shown(app)) == 3


async def test_the_key_bar_at_80_columns_keeps_the_actions_help_and_palette(tmp_path: Path) -> None:
    for cls in (ControlConsoleApp, ConsoleApp):
        app = cls(settings_for(tmp_path), "sim", live=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            bar = str(app.query_one("#keys", Static).render()).rstrip()
            assert len(bar) <= 80, bar
            keys = (" r ", " f ", " s ", " / ", " e ", " ? ", " q ") if cls is ControlConsoleApp else \
                (" / ", " e ", " p ", " d ", " ? ", " q ")
            for key in keys:
                assert key in f" {bar} ", (key, bar)
            assert bar.endswith("^p palette") or bar.endswith("^p"), bar
            if cls is ControlConsoleApp:
                assert "start/stop" in bar, bar


