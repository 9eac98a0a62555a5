"""SVG snapshots of every screen the console draws over its panels, at 80x24 and 120x40: the overview of a fleet,
the flags dialog, the sweep view, the picker, the confirmations (restart, flag change, stop, start, rollback) and
the help. They are the check that a restructuring of the console changes nothing drawn.

Everything drawn is fixed: the console's clock is pinned, the panels show the fixed states of
tests/helpers/console_states.py, the deployment's command is a fixed argv (never a tmp path or a port), and the sweep's
results directory is named relative to the test's working directory."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList

from tests.helpers import console_states as cs
from tests.helpers.config_toml import ConfigFile
from tests.helpers.fleet_states import NOW as FLEET_NOW
from tests.helpers.fleet_states import ROWS
from tests.helpers.fleet_states import settings as fleet_settings
from tests.helpers.pilot import settled, until
from tests.helpers.ports import free_port
from tests.helpers.sweep_files import full_sweep
from tui.config.deployments import parse_deployment
from tui.config.parts import HostConfig
from tui.config.settings import Settings, load
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.console.overview import FLEET_SCREEN
from tui.engine import Engine
from tui.engine.updates import GpusSampled, PhaseChanged, ThroughputSampled
from tui.model import Phase, UnitObserved, UnitState
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.picker import PickerScreen
from tui.screens.sweep import SweepScreen
from widgets.fleet import FleetTable

SIZES = [(80, 24), (120, 40)]
IDS = ["80x24", "120x40"]
#: the deployment the console shows, as in tests/helpers/console_states.py
NAME = "k26-dflash"
OTHER = "k26-eagle"
#: the sweep's results directory, relative to the test's working directory (its tmp dir): drawn in the key bar
SWEEP_DIR = Path("sweeps") / f"{NAME}-20250101T000000Z"

RunBefore = Callable[[Pilot[Any]], Awaitable[None]]


def console_settings(tmp: Path) -> Settings:
    """Two `process` deployments on a local host: the shown one's command is the fixed argv of the states (the
    flags dialog and the confirmations draw it), the other is for the picker. The endpoints are never reached."""
    hosts = {"gpu-box": HostConfig(gpu_source="none")}
    deps = {NAME: parse_deployment({"host": "gpu-box", "manager": "process", "command": list(cs.ARGV),
                                                   "endpoint": f"http://127.0.0.1:{free_port()}"}),
            OTHER: parse_deployment({"host": "gpu-box", "manager": "process",
                                                    "command": [*cs.ARGV[:5], "--speculative-algorithm", "EAGLE3"],
                                                    "endpoint": f"http://127.0.0.1:{free_port()}"})}
    return load(str(ConfigFile(state_dir=tmp / "state", hosts=hosts, deployments=deps).write(tmp / "config.toml")))


def console(tmp: Path, monkeypatch: pytest.MonkeyPatch, *, running: bool = True) -> ControlConsoleApp:
    """The full console on its deployment's real Engine (collectors not started), clock pinned, run from the tmp
    dir (the sweep's directory is drawn relative to it). `running`: the unit as last read, and the engine's
    snapshot the fixed one of a ready run (else of a stopped one): the engine posts it to the console every second."""
    monkeypatch.chdir(tmp)
    # the demo's deployment (in every config) runs this interpreter, and the picker draws its name: `python3` as
    # in CI, not whichever name the tests were started with (`.venv/bin/python -m pytest` drew `python`)
    monkeypatch.setattr(sys, "executable", str(Path(sys.executable).with_name("python3")))
    settings = console_settings(tmp)
    app = ControlConsoleApp(settings, NAME, live=False)
    app.clock = lambda: cs.T0 + 103.0
    w = Engine(settings, NAME, settings.deployments[NAME])
    unit = (UnitState(active="active", sub="running", main_pid=106324, invocation="3f9c2a1be0d84c57", argv=cs.ARGV)
            if running else UnitState(active="inactive", sub="dead"))
    w.feed(UnitObserved(cs.T0, unit))
    snap = cs.snapshot(Phase.READY if running else Phase.STOPPED)
    monkeypatch.setattr(w, "snapshot", lambda now=None: snap)
    app.engine = w
    return app


async def panels(pilot: Pilot[Any]) -> None:
    """The panels under the dialog, drawn: the engine's fixed snapshot, its GPUs and (once ready) throughput."""
    app = pilot.app
    assert isinstance(app, ControlConsoleApp) and app.engine is not None
    snap = app.engine.snapshot(app.clock())
    ready = snap.phase == Phase.READY
    app.post_message(EngineUpdated(PhaseChanged(snap)))
    gib, util = (128.4, 68) if ready else (96.0, 0)
    app.post_message(EngineUpdated(GpusSampled(cs.gpus(gib, util), {i: tuple(h) for i, h in cs.history(gib).items()})))
    if ready:
        sample, hist = cs.throughput()
        app.post_message(EngineUpdated(ThroughputSampled(sample, tuple(hist))))
    assert await until(pilot, lambda: app.shown.snap is snap and app.shown.gpu_snap is not None
                       and (app.shown.tp is not None or not ready))
    assert await until(pilot, lambda: not app.shown.due)  # a refresh tick has drawn what the updates made due
    # twice: the columns share the width by what each panel holds, and a panel wraps its text at the width it has
    # when drawn; the second draw is at the width the first one settled
    for _ in range(2):
        app.render_all()
        app.render_throughput(force_plot=True)
        await settled(pilot)


def then(*keys: str, shown: Callable[[ControlConsoleApp], bool]) -> RunBefore:
    """The ready console, then `keys` pressed, until `shown` holds."""
    async def run_before(pilot: Pilot[Any]) -> None:
        await panels(pilot)
        await pilot.press(*keys)
        app = pilot.app
        assert isinstance(app, ControlConsoleApp)
        assert await until(pilot, lambda: shown(app))
        await pilot.wait_for_scheduled_animations()
        await settled(pilot)

    return run_before


def confirm_titled(title: str) -> Callable[[ControlConsoleApp], bool]:
    return lambda app: isinstance(app.screen, ConfirmScreen) and app.screen.title_text == title


def flags_shown(app: ControlConsoleApp) -> bool:
    return isinstance(app.screen, FlagsScreen) and any(t.row_count for t in app.screen.query(DataTable))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_overview(size: tuple[int, int], snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet overview: five deployments, one of each kind of row (ready, failed, stalled, another bringup at
    work, the host down), as test_console_sizes.py draws it."""
    app = ControlConsoleApp(fleet_settings(tmp_path), "sim-a", live=False, fleet=[r.name for r in ROWS])
    app.clock = lambda: FLEET_NOW
    monkeypatch.setattr(app, "fleet_rows", lambda: list(ROWS))

    async def run_before(pilot: Pilot[Any]) -> None:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen)
                           and len(app.get_screen(FLEET_SCREEN).query_one(FleetTable).shown) == len(ROWS))

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_flags(size: tuple[int, int], snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert snap_compare(console(tmp_path, monkeypatch), terminal_size=size, run_before=then("f", shown=flags_shown))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_sweep(size: tuple[int, int], snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep view of a finished sweep (three configurations measured, one failed in graph capture), opened
    from the console by its key."""
    app = console(tmp_path, monkeypatch)
    full_sweep(tmp_path / SWEEP_DIR)
    monkeypatch.setattr("tui.console.sweeps.latest_sweep", lambda state, name: SWEEP_DIR)

    def shown(app: ControlConsoleApp) -> bool:
        return isinstance(app.screen, SweepScreen) and app.screen.updates > 0

    assert snap_compare(app, terminal_size=size, run_before=then("S", shown=shown))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_picker(size: tuple[int, int], snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def shown(app: ControlConsoleApp) -> bool:
        deployments = len(app.settings.deployments)
        return isinstance(app.screen, PickerScreen) and app.screen.query_one(OptionList).option_count == deployments

    assert snap_compare(console(tmp_path, monkeypatch), terminal_size=size, run_before=then("d", shown=shown))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_confirm_restart(size: tuple[int, int], snap_compare: Any, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert snap_compare(console(tmp_path, monkeypatch), terminal_size=size,
                        run_before=then("r", shown=confirm_titled(f"Restart {NAME} on gpu-box?")))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_confirm_flag_change(size: tuple[int, int], snap_compare: Any, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA graphs off (f, g, a): the restart's question lists the flag change."""
    async def run_before(pilot: Pilot[Any]) -> None:
        await then("f", shown=flags_shown)(pilot)
        await pilot.press("g", "a")
        app = pilot.app
        assert isinstance(app, ControlConsoleApp)
        assert await until(pilot, lambda: confirm_titled(f"Restart {NAME} on gpu-box?")(app))

    assert snap_compare(console(tmp_path, monkeypatch), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_confirm_stop(size: tuple[int, int], snap_compare: Any, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert snap_compare(console(tmp_path, monkeypatch), terminal_size=size,
                        run_before=then("s", shown=confirm_titled(f"Stop {NAME} on gpu-box?")))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_confirm_start(size: tuple[int, int], snap_compare: Any, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert snap_compare(console(tmp_path, monkeypatch, running=False), terminal_size=size,
                        run_before=then("s", shown=confirm_titled(f"Start {NAME} on gpu-box?")))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_confirm_rollback(size: tuple[int, int], snap_compare: Any, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """After a failed restart with CUDA graphs off: back to the last flags that reached ready."""
    app = console(tmp_path, monkeypatch)

    async def run_before(pilot: Pilot[Any]) -> None:
        await panels(pilot)
        w = app.engine
        assert w is not None
        await w.manager.save_argv("ready", list(cs.ARGV))
        await w.manager.write_argv([*cs.ARGV, "--disable-cuda-graph"])
        app.offer_rollback(w)
        assert await until(pilot, lambda: confirm_titled(f"Roll back {NAME} on gpu-box?")(app))

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_help(size: tuple[int, int], snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert snap_compare(console(tmp_path, monkeypatch), terminal_size=size,
                        run_before=then("question_mark", shown=lambda app: isinstance(app.screen, HelpScreen)))

