"""Issue 28, item 2: every dialog that can lead to an action names the deployment and its host in its title (the
flags editor, the start/stop and restart confirmations, the rollback offer; the `d` picker names the one shown), and
the overview's cursor stays on the row it was on when a filter is typed and cleared with Esc: `f` on the overview
opened the flags of another row than the operator's, and only the restart confirmation caught it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.helpers.config_toml import ConfigFile
from tests.helpers.console_app import shown
from tests.helpers.pilot import until
from tests.helpers.ports import free_port
from tui.config.deployments import parse_deployment
from tui.config.parts import HostConfig
from tui.config.settings import Settings, load
from tui.console.control import ControlConsoleApp
from tui.console.messages import RestartFinished
from tui.console.overview import FLEET_SCREEN
from tui.engine import Engine
from tui.model import Outcome, Phase, Result, Step, UnitObserved, UnitState
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen
from tui.screens.fleet import FleetScreen
from tui.screens.picker import PickerScreen
from widgets.fleet import FleetTable
from widgets.fleet_rows import FleetRow

NOW = 1_000_000.0
#: three deployments over two hosts: the two on gpu-a differ only by name
HOSTS = {"sim-c": "gpu-a", "sim-d": "gpu-b", "sim-e": "gpu-a"}


def settings(tmp: Path) -> Settings:
    hosts = {h: HostConfig(gpu_source="none") for h in set(HOSTS.values())}
    command = [sys.executable, "-c", "pass", "--tp-size", "8"]
    deps = {n: parse_deployment({"host": h, "manager": "process", "command": command,
                                 "endpoint": f"http://127.0.0.1:{free_port()}"})
            for n, h in HOSTS.items()}
    return load(str(ConfigFile(state_dir=tmp / "state", hosts=hosts, deployments=deps).write(tmp / "config.toml")))


def overview(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> ControlConsoleApp:
    app = ControlConsoleApp(settings(tmp), "sim-c", live=False, fleet=list(HOSTS))
    app.clock = lambda: NOW
    rows = [FleetRow(n, h, Phase.READY, since=NOW - 60) for n, h in HOSTS.items()]
    monkeypatch.setattr(app, "fleet_rows", lambda: list(rows))
    return app


def table(app: ControlConsoleApp) -> FleetTable:
    return app.get_screen(FLEET_SCREEN).query_one(FleetTable)


def engine(app: ControlConsoleApp, name: str) -> Engine:
    assert app.fleet is not None
    return app.fleet.engines[name]


def see_unit(w: Engine, running: bool) -> None:
    unit = (UnitState(active="active", sub="running", main_pid=4242, invocation="aaaaaaaa1111")
            if running else UnitState(active="inactive", sub="dead"))
    w.feed(UnitObserved(time.time(), unit))


def title_on_screen(app: ControlConsoleApp) -> str:
    """The dialog's title as drawn (not only as the screen was told it)."""
    return str(app.screen.query_one("#dialog-title", Static).render())


async def answer_no(app: ControlConsoleApp, pilot: object) -> None:
    await pilot.press("n")  # type: ignore[attr-defined]
    assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))  # type: ignore[arg-type]


async def test_filter_then_escape_keeps_the_row_and_every_dialog_names_it_and_its_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = overview(tmp_path, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(table(app).shown) == 3)
        assert table(app).cursor == "sim-c"

        # `/` narrows the rows to sim-d (the cursor has to move there while sim-c is hidden); Esc clears the
        # filter and the cursor is back on sim-c, the row the operator was on
        await pilot.press("slash", "-", "d")
        assert table(app).shown == ["sim-d"] and table(app).cursor == "sim-d"
        await pilot.press("escape")
        assert table(app).shown == ["sim-c", "sim-d", "sim-e"]
        assert table(app).cursor == "sim-c", table(app).cursor
        # the same with the filter kept (Enter) and cleared later
        await pilot.press("slash", *"gpu-b", "enter", "escape")
        assert table(app).cursor == "sim-c"
        # a row chosen while filtered is the operator's choice: it stays after Esc
        await pilot.press("slash", *"gpu-a", "enter", "down", "escape")
        assert table(app).cursor == "sim-e"
        await pilot.press("up", "up")
        assert table(app).cursor == "sim-c"

        # the flags editor: its title names the row's deployment and host before its keys
        await pilot.press("f")
        assert await until(pilot, lambda: isinstance(app.screen, FlagsScreen))
        screen = app.screen
        assert isinstance(screen, FlagsScreen)
        assert screen.title_text.startswith("Flags · sim-c on gpu-a · space: toggle/edit"), screen.title_text
        assert "sim-c on gpu-a" in title_on_screen(app)
        await pilot.press("escape")
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))

        # restart, then start (its unit is stopped) on sim-c
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Restart sim-c on gpu-a?"
        assert "sim-c on gpu-a" in title_on_screen(app)
        await answer_no(app, pilot)
        see_unit(engine(app, "sim-c"), running=False)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Start sim-c on gpu-a?"
        await answer_no(app, pilot)

        # the next row: another host, and a running unit: stop
        await pilot.press("down")
        assert table(app).cursor == "sim-d"
        see_unit(engine(app, "sim-d"), running=True)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Stop sim-d on gpu-b?"
        assert "sim-d on gpu-b" in title_on_screen(app)
        await answer_no(app, pilot)
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FlagsScreen))
        assert isinstance(app.screen, FlagsScreen) and "· sim-d on gpu-b ·" in app.screen.title_text
        await pilot.press("escape")
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))

        # the rollback offered after this console's own restart of sim-d failed
        w = engine(app, "sim-d")
        base = await w.argv()
        await w.manager.save_argv("ready", base)
        await w.manager.write_argv([*base, "--disable-cuda-graph"])
        done = tuple(Step(s, "done", s) for s in ("lock", "flags", "stop", "release", "start"))
        app.post_message(RestartFinished(Outcome(Result.FAILED, Phase.FAILED, "failed in warmup", steps=done)))
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Roll back sim-d on gpu-b?"
        assert "deployment: sim-d" in app.screen.lines and "host:       gpu-b" in app.screen.lines
        await answer_no(app, pilot)

        # the console on sim-e (Enter), and its `d` picker names the deployment shown and its host
        await pilot.press("down", "enter")
        assert await until(pilot, lambda: app.deployment == "sim-e" and not isinstance(app.screen, FleetScreen))
        await pilot.press("d")
        assert await until(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert "showing sim-e on gpu-a" in title_on_screen(app)


async def test_an_answer_after_the_console_moved_to_another_deployment_does_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dialog is answered for the deployment it names: if the console shows another one by then (the overview's
    Enter on another row while the flags were read), the yes acts on neither, and says so."""
    app = overview(tmp_path, monkeypatch)
    runs: list[object] = []
    monkeypatch.setattr(ControlConsoleApp, "run_protocol", lambda self, *a, **kw: runs.append(a))
    async with app.run_test(size=(120, 40)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(table(app).shown) == 3)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Restart sim-c on gpu-a?"
        app.open_watch("sim-d")  # as the overview's Enter on sim-d does
        await pilot.press("y")
        assert await until(pilot, lambda: any("nothing was done to sim-c" in n
                                              for n in shown(app)))
        assert runs == []
