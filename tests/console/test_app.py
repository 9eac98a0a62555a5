"""Pilot tests of the console, driven by keys, on a real simulated deployment (real processes, HTTP, logs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import OptionList

from tests.helpers.console_app import screen_text
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.console.viewer import ConsoleApp
from tui.engine.updates import LogsRead, PhaseChanged, ThroughputSampled
from tui.lifecycle.lines import line_kinds
from tui.model import LogLine, Phase
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen
from widgets.error_log import ErrorLog

pytestmark = pytest.mark.slow


def logs_read(lines: list[LogLine]) -> EngineUpdated:
    """What the engine's listener posts for a batch of log lines."""
    return EngineUpdated(LogsRead(tuple(lines), line_kinds(ln.text for ln in lines)))




async def stop_quietly(app: ControlConsoleApp) -> None:
    w = app.engine
    if w is not None:
        w.action("stop")
        await w.manager.stop()
        await w.close()
        app.engine = None


async def start_from_console(app: ControlConsoleApp, pilot) -> None:  # type: ignore[no-untyped-def]
    assert await until(pilot, lambda: app.engine is not None and app.engine.state.unit is not None)
    await pilot.press("s")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    assert isinstance(app.screen, ConfirmScreen)
    await pilot.press("y")


async def open_flags(app: ControlConsoleApp, pilot) -> FlagsScreen:  # type: ignore[no-untyped-def]
    """The live console, connected, with its flags dialog open."""
    assert await until(pilot, lambda: app.engine is not None and app.engine.state.unit is not None)
    await pilot.press("f")
    await until(pilot, lambda: isinstance(app.screen, FlagsScreen))
    assert isinstance(app.screen, FlagsScreen)
    return app.screen


async def test_start_toggle_flag_restart_reaches_ready_without_graph_capture(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim")
    async with app.run_test(size=(120, 36)) as pilot:
        try:
            await start_from_console(app, pilot)
            assert await until(pilot, lambda: app.engine.state.phase == Phase.READY)
            first = app.engine.state
            assert Phase.GRAPH_CAPTURE in [t.phase for t in first.timeline]

            await pilot.press("f")
            await until(pilot, lambda: isinstance(app.screen, FlagsScreen))
            assert isinstance(app.screen, FlagsScreen)
            flags = app.screen
            assert flags.specs[0].name == "disable-cuda-graph"
            await pilot.press("space")
            assert "disable-cuda-graph" in flags.pending
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert isinstance(app.screen, ConfirmScreen)
            body = "\n".join(app.screen.lines)
            assert "sim" in body and "simhost" in body and "+ --disable-cuda-graph" in body
            await pilot.press("y")

            assert await until(pilot, lambda: app.engine.state.invocation != first.invocation
                               and app.engine.state.phase in (Phase.READY, Phase.FAILED), 40)
            state = app.engine.state
            assert state.phase == Phase.READY
            assert Phase.GRAPH_CAPTURE not in [t.phase for t in state.timeline]
            assert await until(pilot, lambda: ("follow", "done") in [(s.name, s.status) for s in app.shown.steps], 5)
            names = [(s.name, s.status) for s in app.shown.steps]
            for expected in [("lock", "done"), ("flags", "done"), ("stop", "done"), ("release", "done"),
                             ("start", "done"), ("follow", "done")]:
                assert expected in names
            assert "--disable-cuda-graph" in state.unit.argv
        finally:
            await stop_quietly(app)


async def test_dflash_scenario_shows_failed_with_hint(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path, scenario="dflash-graph-crash"), "sim")
    async with app.run_test(size=(120, 36)) as pilot:
        try:
            await start_from_console(app, pilot)
            assert await until(pilot, lambda: app.engine.state.phase == Phase.FAILED, 40)
            assert await until(pilot, lambda: app.engine.state.failure is not None)
            f = app.engine.state.failure
            assert f is not None and f.kind == "cuda-graph"
            assert "disable-cuda-graph" in f.hint
            # the engine's state is ahead of the screen by one message: the panel is read once it has drawn it
            def shown() -> str:
                return str(app.query_one("#failure").render())

            assert await until(pilot, lambda: "disable-cuda-graph" in shown()), shown()
            assert "cuda-graph" in shown()
        finally:
            await stop_quietly(app)


async def test_read_only_has_no_control_bindings(tmp_path: Path) -> None:
    app = ConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        actions = {b.binding.action for b in app.active_bindings.values()}
        # the acting keys are the console screen's, bound to the app's actions: none of them here
        assert {"app.restart", "app.flags", "app.start_stop"}.isdisjoint(actions)
        assert "toggle_errors" in actions
        await pilot.press("r", "f", "s")
        await settled(pilot)
        assert not isinstance(app.screen, (ConfirmScreen, FlagsScreen))
    full = ControlConsoleApp(settings_for(tmp_path / "b"), "sim", live=False)
    async with full.run_test(size=(100, 30)):
        actions = {b.binding.action for b in full.active_bindings.values()}
        assert {"app.restart", "app.flags", "app.start_stop"} <= actions


async def test_filter_searches_the_whole_buffer_and_markup_is_literal(tmp_path: Path) -> None:
    from widgets.log_buffer import LINES

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        nasty = "[bold]not bold[/] \x1b[31mred\x1b[0m [/] [link=x]y"
        lines = [f"[2026-11-29 10:00:00 TP0] Decode batch, #running-req: {i}" for i in range(LINES - 2)]
        lines.insert(3, "[2026-11-29 10:00:00 TP0] needle-in-the-haystack")
        lines.append(nasty)
        app.post_message(logs_read([LogLine(at=1.0, text=t) for t in lines]))
        await settled(pilot)
        await pilot.press("e")  # all lines
        await until(pilot, lambda: log.log_view.line_count == len(lines))
        assert log.log_view.line_count == len(lines)
        await pilot.press("slash")
        await pilot.press(*"needle")
        await pilot.press("enter")
        await until(pilot, lambda: log.matching() == ["[2026-11-29 10:00:00 TP0] needle-in-the-haystack"])
        assert log.matching() == ["[2026-11-29 10:00:00 TP0] needle-in-the-haystack"]
        assert log.log_view.line_count == 1
        log.set_filter("not bold")
        assert log.matching() == ["[bold]not bold[/] red [/] [link=x]y"]
        assert log.log_view.lines[0] == "[bold]not bold[/] red [/] [link=x]y"
        assert await until(pilot, lambda: "[bold]not bold[/] red [/] [link=x]y" in screen_text(app)), screen_text(app)


async def test_errors_view_keeps_tracebacks_whole(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    src = Path(__file__).parents[1] / "fixtures/logs/sglang_scheduler_exception_load_model.log"
    text = [ln for ln in src.read_text().splitlines() if not ln.startswith("#")]
    async with app.run_test(size=(100, 30)) as pilot:
        app.post_message(logs_read([LogLine(at=1.0, text=t) for t in text]))
        await settled(pilot)
        shown = app.query_one(ErrorLog).matching()
        start = next(i for i, t in enumerate(shown) if "Scheduler hit an exception" in t)
        frames = [t for t in text if t.startswith("  File ")]
        assert frames and all(f in shown[start:] for f in frames)


async def test_pause_freezes_and_resume_catches_up(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("p")
        await pilot.press("e")
        app.post_message(logs_read([LogLine(at=1.0, text="line while paused")]))
        await settled(pilot)
        assert app.query_one(ErrorLog).log_view.line_count == 0
        await pilot.press("p")
        await until(pilot, lambda: app.query_one(ErrorLog).log_view.lines == ["line while paused"])
        assert app.query_one(ErrorLog).log_view.lines == ["line while paused"]


async def test_worker_errors_do_not_kill_the_app(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim")
    async with app.run_test(size=(100, 30)) as pilot:
        assert await until(pilot, lambda: app.engine is not None)
        w = app.engine

        async def boom() -> None:
            raise RuntimeError("collector exploded")

        w.manager.state = boom  # type: ignore[method-assign]
        await until(pilot, lambda: "unit" in w.collector_errors)
        assert app.is_running
        assert "unit" in w.collector_errors
        await w.close()
        app.engine = None


async def test_log_keeps_following_past_its_buffer_and_marks_runs(tmp_path: Path) -> None:
    """Past the buffer the view must still show the newest lines (Textual's Log alone froze there); a new run's
    lines start with a marker naming the run, and the older run's marker is kept with the errors."""
    from widgets.log_buffer import LINES

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("e")
        log = app.query_one(ErrorLog)
        n = 0
        for inv in ("aaaaaaaa1111", "bbbbbbbb2222"):
            for _ in range(3):
                batch = [LogLine(at=1.0 + n, text=f"seq {n + i}", invocation=inv) for i in range(12_000)]
                n += len(batch)
                app.post_message(logs_read(batch))
                await settled(pilot)
        # the view holds as many rows as the buffer holds lines, no more: Textual's Log alone kept up to LINES +
        # ERRORS rows, 5,000 lines the buffer had dropped (the two runs' markers, kept with the errors, are above
        # the newest lines in the buffer; the view, appended to, shows the two lines before those instead)
        await until(pilot, lambda: not log.has_due)
        assert log.log_view.line_count == len(log.entries) == LINES + 2
        assert log.log_view.lines[-LINES:] == [f"seq {i}" for i in range(n - LINES, n)]
        assert log.log_view.is_vertical_scroll_end
        screen = "\n".join(line.text for line in log.log_view.render_lines(log.log_view.region.reset_offset))
        assert f"seq {n - 1}" in [ln.strip() for ln in screen.splitlines()], screen[-300:]
        markers = [t for t, _ in log.entries if t.startswith("──── run ")]
        assert [m.split()[2] for m in markers] == ["aaaaaaaa", "bbbbbbbb"]  # a marker is kept as the errors are
        kept = [t for t, _ in log.entries if not t.startswith("──── run ")]
        assert kept == [f"seq {i}" for i in range(n - LINES, n)]  # the newest lines, none of the first run's


async def test_a_traceback_stays_in_both_views_after_a_busy_log_pushed_out_the_lines_around_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server busy between errors (a decode batch line per step) must not push its errors out of the panel:
    they have a bound of their own. The errors view still shows the traceback, and all lines show it above the
    newest lines after a switch rebuilds the view from the buffer."""
    import widgets.log_buffer as lb

    monkeypatch.setattr(lb, "LINES", 200)
    monkeypatch.setattr(lb, "ERRORS", 50)
    traceback = ["Traceback (most recent call last):", '  File "scheduler.py", line 1, in run',
                 "RuntimeError: CUDA error: an illegal memory access was encountered"]
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        app.post_message(logs_read([LogLine(at=1.0, text=t) for t in ["starting", *traceback]]))
        busy = [f"Decode batch. #running-req: 1, gen throughput (token/s): {i}" for i in range(1000)]
        for k in range(0, len(busy), 250):
            app.post_message(logs_read([LogLine(at=2.0, text=t) for t in busy[k:k + 250]]))
        assert await until(pilot, lambda: len(log.entries) == 200 + len(traceback) and not log.has_due)
        assert log.matching() == traceback and log.log_view.lines == traceback
        await pilot.press("e")
        assert await until(pilot, lambda: log.show_all and log.log_view.line_count == 203)
        assert log.log_view.lines == [*traceback, *busy[-200:]]


async def test_escape_clears_an_applied_filter_and_help_lists_the_console_keys(tmp_path: Path) -> None:
    from tui.screens.help import HelpScreen

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        app.post_message(logs_read([LogLine(at=1.0, text=f"line {i}") for i in range(5)]))
        await pilot.press("e", "slash", *"line 3", "enter")
        await settled(pilot)
        log = app.query_one(ErrorLog)
        assert log.matching() == ["line 3"]
        await pilot.press("escape")
        await until(pilot, lambda: log.filter_text == "" and len(log.matching()) == 5)
        assert log.filter_text == "" and len(log.matching()) == 5
        keys = dict((d, k) for k, d in app.console_screen.help_rows())
        listed = [k for k, _ in app.console_screen.help_rows()]
        assert len(listed) == len(set(listed)) and "end" in listed and "esc" in listed, listed  # each key once
        assert keys["Restart"] == "r" and keys["Filter"] == "/"
        assert not any("Scroll" in d for d in keys)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        assert not isinstance(app.screen, HelpScreen)


async def test_log_follows_while_the_filter_box_is_open_and_stops_when_scrolled_up(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)

        async def send(a: int, b: int) -> None:
            app.post_message(logs_read([LogLine(at=1.0, text=f"n{i}") for i in range(a, b)]))
            await settled(pilot)

        await pilot.press("e")
        await send(0, 200)
        await pilot.press("slash")  # the filter box takes three rows from the log: the end moves
        await settled(pilot)
        await send(200, 400)
        assert log.log_view.is_vertical_scroll_end and log.unseen == 0
        await pilot.press("escape")
        await settled(pilot)
        log.log_view.scroll_to(y=10, animate=False, immediate=True)  # the user scrolls up
        await settled(pilot)
        await send(400, 450)
        assert not log.following and log.unseen == 50 and log.log_view.scroll_y == 10
        await pilot.press("end")
        await settled(pilot)
        await send(450, 460)
        assert log.following and log.log_view.is_vertical_scroll_end


async def test_lines_arriving_while_paused_past_the_buffer_show_the_newest_on_resume(tmp_path: Path) -> None:
    """Lines are classified as they arrive and drawn at the next flush; while paused they queue, and past the
    buffer the queue gives way to a rebuild from the buffer: the newest lines show, none twice."""
    from widgets.log_buffer import LINES

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("e", "p")
        log = app.query_one(ErrorLog)
        n = log.rows + 5_000
        for start in range(0, n, 10_000):
            batch = [LogLine(at=1.0, text=f"seq {i}") for i in range(start, min(n, start + 10_000))]
            app.post_message(logs_read(batch))
            await settled(pilot)
        await settled(pilot)
        assert log.log_view.line_count == 0 and log.has_due
        assert len(log._due) <= log.rows  # what waits for the screen is bounded like the buffer
        await pilot.press("p")
        await until(pilot, lambda: log.log_view.line_count == LINES)
        assert log.log_view.line_count == LINES
        assert log.log_view.lines[0] == f"seq {n - LINES}" and log.log_view.lines[-1] == f"seq {n - 1}"
        assert not log.has_due


async def test_a_flag_change_answered_no_is_dropped_and_a_later_r_restarts_without_it(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim")
    async with app.run_test(size=(120, 36)) as pilot:
        try:
            await open_flags(app, pilot)
            await pilot.press("space", "a")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert isinstance(app.screen, ConfirmScreen)
            assert "+ --disable-cuda-graph" in "\n".join(app.screen.lines)
            await pilot.press("n")
            assert await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert isinstance(app.screen, ConfirmScreen)
            body = "\n".join(app.screen.lines)
            assert "disable-cuda-graph" not in body and "no flag change" in body, body
            await pilot.press("n")
        finally:
            await stop_quietly(app)


async def test_the_console_keeps_updating_behind_a_dialog(tmp_path: Path) -> None:
    """A restart is confirmed over the server's current state, not a picture from when the dialog opened."""
    from tui.screens.help import HelpScreen

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("e", "question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen)
        app.post_message(logs_read([LogLine(at=1.0, text="written while the help was open")]))
        assert await until(pilot, lambda: app.query_one(ErrorLog).log_view.lines == ["written while the help was open"])
        assert isinstance(app.screen, HelpScreen)
        assert app.query_one(ErrorLog).log_view.lines == ["written while the help was open"]


async def test_a_new_runs_longer_command_line_is_shown_whole(tmp_path: Path) -> None:
    """A restart from the CLI adds a flag: the lifecycle panel's command line grows by a row, and the flag added
    at its end must be on screen (the panel kept its old height and cut it)."""
    import dataclasses

    from tests.helpers import console_states as cs

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        snap = cs.snapshot(Phase.READY)
        app.post_message(EngineUpdated(PhaseChanged(snap)))
        assert await until(pilot, lambda: app.shown.snap is snap)
        longer = (*cs.ARGV, "--mem-fraction-static", "0.85", "--disable-cuda-graph")
        app.post_message(EngineUpdated(PhaseChanged(dataclasses.replace(snap, flags=longer, invocation="new-run"))))
        assert await until(pilot, lambda: "--disable-cuda-graph" in " ".join(screen_text(app).split()))
        text = " ".join(screen_text(app).split())
        assert "--disable-cuda-graph" in text, screen_text(app)


async def test_after_a_stop_the_last_figures_are_labelled_and_a_new_run_clears_old_steps(tmp_path: Path) -> None:
    import dataclasses

    from tests.helpers import console_states as cs
    from tui.console.messages import RestartStepped
    from tui.ops import restart as protocol

    def panel(app: ControlConsoleApp, sel: str) -> str:
        return "\n".join(str(w.render()) for w in app.query(f"{sel} Static, {sel} TextLines"))

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ready = cs.snapshot(Phase.READY)
        app.post_message(EngineUpdated(PhaseChanged(ready)))
        sample, hist = cs.throughput()
        app.post_message(EngineUpdated(ThroughputSampled(sample, tuple(hist))))
        app.post_message(RestartStepped(protocol.Step("stop", "done", "stopped")))
        assert await until(pilot, lambda: app.shown.snap is ready and app.shown.tp is sample
                           and len(app.shown.steps) == 1)
        app.render_all()
        await until(pilot, lambda: "running 4" in panel(app, "#throughput")
                    and "endpoint: generation ok" in panel(app, "#lifecycle"))
        assert "running 4" in panel(app, "#throughput") and "endpoint: generation ok" in panel(app, "#lifecycle")
        # a refresh tick: what the sample made due is drawn and done with
        assert await until(pilot, lambda: not app.shown.due)
        app.post_message(EngineUpdated(PhaseChanged(cs.snapshot(Phase.STOPPED))))
        # the refresh tick redraws it: no new sample comes to do it once the server stops
        await until(pilot, lambda: "the last while it served" in panel(app, "#throughput"))
        tp = panel(app, "#throughput")
        assert "the last while it served" in tp and "running 4" not in tp, tp
        assert "endpoint:" not in panel(app, "#lifecycle")
        assert "stop" in str(app.query_one("#steps").render())  # this console's own last action shows
        app.post_message(EngineUpdated(PhaseChanged(dataclasses.replace(ready, invocation="started-from-the-cli"))))
        await until(pilot, lambda: app.shown.steps == [] and "stop" not in str(app.query_one("#steps").render()))
        assert app.shown.steps == [] and "stop" not in str(app.query_one("#steps").render())


async def test_the_consoles_tick_ages_the_throughput_figures_once_samples_stop(tmp_path: Path) -> None:
    """No sample comes once a server stalls: the console's one timer redraws the panel, which says since when."""
    from tests.helpers import console_states as cs
    from widgets.throughput import clock_time

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    now = [0.0]
    app.clock = lambda: now[0]
    async with app.run_test(size=(100, 30)) as pilot:
        sample, hist = cs.throughput()
        now[0] = sample.at + 0.5
        app.post_message(EngineUpdated(PhaseChanged(cs.snapshot(Phase.READY))))
        app.post_message(EngineUpdated(ThroughputSampled(sample, tuple(hist))))
        assert await until(pilot, lambda: "running 4" in str(app.query_one("#tps-now").render()))
        assert "no samples since" not in str(app.query_one("#tps-now").render())
        now[0] = sample.at + 30  # no sample since
        since = f"no samples since {clock_time(hist[-1][0])}"
        assert await until(pilot, lambda: since in str(app.query_one("#tps-now").render()))


async def test_a_flags_one_letter_key_toggles_it_in_the_flags_dialog(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim")
    async with app.run_test(size=(120, 36)) as pilot:
        try:
            flags = await open_flags(app, pilot)
            key = {f.name: f.key for f in flags.specs}["disable-cuda-graph"]
            assert key
            await pilot.press(key)
            await until(pilot, lambda: "disable-cuda-graph" in flags.pending)
            assert "disable-cuda-graph" in flags.pending
            await pilot.press(key)
            await until(pilot, lambda: "disable-cuda-graph" not in flags.pending)
            assert "disable-cuda-graph" not in flags.pending  # toggled back
            await pilot.press("escape")
        finally:
            await stop_quietly(app)


async def test_the_log_scrolls_by_keyboard_after_a_filter_that_matched_nothing_is_cleared(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("e")
        app.post_message(logs_read([LogLine(at=1.0, text=f"n{i}") for i in range(300)]))
        await settled(pilot)
        log = app.query_one(ErrorLog).log_view
        await pilot.press("slash", "z", "z", "enter")  # matches nothing: the log is replaced by a note
        await settled(pilot)
        await pilot.press("escape")
        await until(pilot, lambda: app.focused is log)
        assert app.focused is log
        end = log.scroll_y
        await pilot.press("pageup")
        await until(pilot, lambda: log.scroll_y < end)
        assert log.scroll_y < end


async def test_the_palette_offers_every_console_key_and_the_picker_takes_arrow_keys_at_once(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    other = settings.deployments["sim"].model_copy()
    settings.deployments["other"] = other
    app = ControlConsoleApp(settings, "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        titles = {c.title for c in app.get_system_commands(app.screen)}
        # the full console's own keys and those it inherits from the read-only console
        assert {"Restart", "Flags", "Filter", "Errors/all", "Pause", "Deployments", "Help"} <= titles, titles
        await pilot.press("d")
        assert await until(pilot, lambda: bool(app.screen.query("#picker")))
        names = list(settings.deployments)
        picker = app.screen.query_one("#picker", OptionList)
        assert app.focused is picker  # arrow keys and Enter work at once, no Tab first
        assert picker.highlighted == names.index("sim")  # the current deployment
        await pilot.press("down", "enter")
        assert await until(pilot, lambda: app.deployment == names[names.index("sim") + 1], 5)


async def test_w_folds_long_log_lines_to_the_panel_and_back_and_the_filter_still_matches_them(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("e")  # all lines
        frame = '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", ' \
                'line 1234, in replay: ret = self.graph_runner.replay(forward_batch, skip_attn_backend_init)'
        app.post_message(logs_read([LogLine(at=1.0, text="short line", invocation="aaaaaaaa1111"),
                                      LogLine(at=1.0, text=frame, invocation="aaaaaaaa1111")]))
        await settled(pilot)
        log = app.query_one(ErrorLog)
        view = log.log_view
        width = view.scrollable_content_region.width
        assert len(frame) > width
        before = view.line_count  # the run marker, the short line, the frame on one line
        await pilot.press("w")
        await until(pilot, lambda: view.line_count > before)
        assert view.line_count > before
        lines = list(view.lines)
        assert all(len(x) <= width for x in lines), (width, lines)
        assert all(x.startswith("  ↳ ") for x in lines[3:]), lines  # the pieces after the first, marked
        assert "".join(x.strip().removeprefix("↳") for x in lines[2:]).replace(" ", "") == frame.replace(" ", "")
        assert "wrapped" in str(log.border_title)
        log.set_filter("skip_attn_backend_init")  # the tail of the folded line: matched on the whole line
        await until(pilot, lambda: [x for x in view.lines if x.strip()] and "File" in view.lines[0])
        assert [x for x in view.lines if x.strip()] and "File" in view.lines[0]
        log.set_filter("")
        await pilot.press("w")
        await until(pilot, lambda: view.line_count == before and frame in view.lines)
        assert view.line_count == before and frame in view.lines


async def test_an_empty_errors_view_says_so_above_the_run_marker_and_all_lines_leave_out_our_own_polling(
        tmp_path: Path) -> None:
    from textual.widgets import Static
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        own = 'INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK'  # uvicorn's access line for our probe
        lines = ["[2026-06-02 08:00:20 TP0] Load weight begin. avail mem=139.20 GB", own,
                 'INFO:     127.0.0.1:51236 - "GET /metrics HTTP/1.1" 200 OK',
                 'INFO:     10.0.0.7:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK']  # a user's: kept
        app.post_message(logs_read([LogLine(at=1.0, text=t, invocation="aaaaaaaa1111") for t in lines]))
        await settled(pilot)
        log = app.query_one(ErrorLog)
        note = app.query_one("#log-empty", Static)
        assert note.display and "no errors or warnings so far" in str(note.render())
        assert [x for x in log.log_view.lines if x.startswith("──── run aaaaaaaa")]  # the marker shows too
        await pilot.press("e")
        await settled(pilot)
        shown = list(log.log_view.lines)
        assert not note.display
        assert lines[0] in shown and lines[3] in shown and own not in shown and lines[2] not in shown, shown
        log.set_filter("GET /health")  # asked for: shown
        await until(pilot, lambda: own in log.log_view.lines)
        assert own in log.log_view.lines


async def test_the_key_bar_keeps_every_key_at_90_columns(tmp_path: Path) -> None:
    from textual.widgets import Static

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(90, 28)) as pilot:
        await settled(pilot)
        bar = str(app.query_one("#keys", Static).render())
        assert len(bar.rstrip()) <= 90, bar
        for key in ("/", " e ", " p ", " d ", " ? ", " q ", " r ", " f ", " s ", "^p"):
            assert key in bar, (key, bar)
        await pilot.resize_terminal(140, 36)
        await until(pilot, lambda: "Errors/all" in str(app.query_one("#keys", Static).render()))
        assert "Errors/all" in str(app.query_one("#keys", Static).render())  # room again: the full labels


async def test_every_collector_note_shows_in_the_lifecycle_panel_and_the_metrics_advice_in_the_throughput_one(
        tmp_path: Path) -> None:
    """A failing GPU or metrics collector is said where the user looks, like the probe's; the advice to turn
    /metrics on belongs to the throughput figures."""
    import dataclasses

    from tests.helpers import console_states as cs
    from tui.model import Note, NoteSource

    def panel(app: ControlConsoleApp, sel: str) -> str:
        return "\n".join(str(w.render()) for w in app.query(f"{sel} Static, {sel} TextLines"))

    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        notes = (Note(NoteSource.GPUS, "gpus: nvidia-smi not found"),
                 Note(NoteSource.METRICS, "metrics: ReadTimeout: timed out"),
                 Note(NoteSource.THROUGHPUT, "no metrics: start the server with --enable-metrics"))
        app.post_message(EngineUpdated(PhaseChanged(dataclasses.replace(cs.snapshot(Phase.READY), notes=notes))))
        assert await until(pilot, lambda: app.shown.snap.notes == notes)
        app.render_all()
        await settled(pilot)
        lifecycle, throughput = panel(app, "#lifecycle"), panel(app, "#throughput")
        assert "gpus: nvidia-smi not found" in lifecycle and "metrics: ReadTimeout" in lifecycle, lifecycle
        assert "no metrics" not in lifecycle and "no metrics: start the server" in throughput, throughput
