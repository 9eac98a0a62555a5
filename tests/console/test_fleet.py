"""The fleet overview (issue 17): the table's rows from snapshots, Pilot tests of the overview on fixed data
(sorting, filtering, Enter opens and Esc returns, acting on a row, read-only, a host down, only changed rows
redrawn), and the overview over real simulated deployments: two `process` deployments on this machine sharing one
transport and one GPU stream, and an SSH host on a closed loopback port shown down without holding them up."""

from __future__ import annotations

import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.console_app import shown as said
from tests.helpers.pilot import settled, until
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host
from tui.config.deployments import parse_deployment
from tui.config.parts import HostConfig
from tui.config.settings import ProbeConfig, Settings, load
from tui.console.control import ControlConsoleApp
from tui.console.overview import CONSOLE_MODE, FLEET_MODE, FLEET_SCREEN
from tui.console.viewer import ConsoleApp
from tui.model import (
    Failure,
    FailureKind,
    GpuSample,
    GpuSnapshot,
    Note,
    NoteSource,
    Phase,
    Snapshot,
    ThroughputSample,
    Transition,
)
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import FleetScreen
from widgets.fleet import FleetTable
from widgets.fleet_rows import FleetRow, row_for

NOW = 1_000_000.0


# ---------------------------------------------------------------------------------------------------- rows


def _snap(**kw: Any) -> Snapshot:
    base: dict[str, Any] = dict(deployment="k26", host="gpu-a", phase=Phase.READY, invocation="i1",
                                timeline=(Transition(Phase.STARTING, NOW - 300), Transition(Phase.READY, NOW - 90)),
                                failure=None, stalled_for=None, unit=None, gpus=None, throughput=None)
    return Snapshot(**{**base, **kw})


def test_row_sums_the_deployments_gpus_only_and_says_the_most_pressing_note() -> None:
    gpus = GpuSnapshot(at=NOW, gpus=tuple(GpuSample(index=i, mem_used_mib=1024.0 * (i + 1), mem_total_mib=8192.0,
                                                    util_pct=10.0 * i) for i in range(4)))
    snap = _snap(gpus=gpus, throughput=ThroughputSample(at=NOW, tokens_per_s=1234.0, source="metrics"),
                 notes=(Note(NoteSource.GPUS, "gpus: hiccup"), Note(NoteSource.HOLDER, "another bringup is at work")))
    row = row_for(snap, [2, 3])
    assert (row.mem_used_mib, row.mem_total_mib, row.util_pct) == (3072.0 + 4096.0, 16384.0, 25.0)
    assert row.tokens_per_s == 1234.0 and row.since == NOW - 90
    assert row.note == "another bringup is at work"  # another bringup's action before a collector's hiccup

    stalled = row_for(_snap(phase=Phase.LOADING, timeline=(Transition(Phase.LOADING, NOW - 200),),
                            stalled_for=71.0, throughput=snap.throughput), [])
    assert stalled.stalled and stalled.note.startswith("STALLED 1m11s") and stalled.tokens_per_s is None

    failed = row_for(_snap(phase=Phase.FAILED, failure=Failure(Phase.GRAPH_CAPTURE, FailureKind.CUDA_GRAPH, (), "",
                                                               NOW)), [])
    assert failed.failure == "cuda-graph"

    down = row_for(_snap(phase=Phase.UNKNOWN, last_phase=Phase.READY, stale="no news from gpu-a for 12 s"), [],
                   host_down="reconnecting (attempt 3): gpu-a: SSH connection refused")
    assert down.phase_label == "host down" and down.since is None
    assert down.note == "reconnecting (attempt 3): gpu-a: SSH connection refused (last seen: ready)"


def test_a_queued_row_says_why_the_scheduler_holds_it_not_the_endpoint_it_has_not_got() -> None:
    why = "queued: Resources (the nodes or GPUs it asks for are held by other jobs)"
    queued = row_for(_snap(phase=Phase.QUEUED, timeline=(Transition(Phase.QUEUED, NOW - 40, why),),
                           notes=(Note(NoteSource.PROBE, "endpoint: connect: refused"),)), [])
    assert queued.phase_label == "queued" and queued.note == why and queued.since == NOW - 40


# ---------------------------------------------------------------------------------------------------- fixed data


def fleet_settings(tmp: Path, names: dict[str, str]) -> Settings:
    """Deployments (name -> host) on hosts of this machine: engines are built, nothing is started."""
    hosts = {h: HostConfig(gpu_source="none") for h in set(names.values())}
    command = [sys.executable, "-c", "pass"]
    deps = {n: parse_deployment({"host": h, "manager": "process", "command": command,
                                 "endpoint": f"http://127.0.0.1:{free_port()}"})
            for n, h in names.items()}
    return load(str(ConfigFile(state_dir=tmp / "state", hosts=hosts, deployments=deps).write(tmp / "config.toml")))


NAMES = {"alpha": "box-b", "bravo": "box-a", "charlie": "box-c", "delta": "box-a"}
ROWS = [
    FleetRow("alpha", "box-b", Phase.READY, since=NOW - 600, mem_used_mib=600_000, mem_total_mib=1_150_000,
             util_pct=87.0, tokens_per_s=2400.0),
    FleetRow("bravo", "box-a", Phase.FAILED, since=NOW - 30, failure="cuda-graph", note="[bold]not markup[/bold]"),
    FleetRow("charlie", "box-c", Phase.UNKNOWN, note="reconnecting (attempt 2): box-c: SSH connection refused",
             host_down="reconnecting (attempt 2): box-c: SSH connection refused"),
    FleetRow("delta", "box-a", Phase.LOADING, since=NOW - 95, stalled=True, note="STALLED 1m11s"),
]


def fleet_app(tmp: Path, monkeypatch: pytest.MonkeyPatch, rows: list[FleetRow],
              cls: type[ConsoleApp] = ControlConsoleApp) -> ConsoleApp:
    app = cls(fleet_settings(tmp, NAMES), "alpha", live=False, fleet=list(NAMES))
    app.clock = lambda: NOW
    monkeypatch.setattr(app, "fleet_rows", lambda: list(rows))
    return app


def fleet_table(app: ConsoleApp) -> FleetTable:
    return app.get_screen(FLEET_SCREEN).query_one(FleetTable)


def shown(app: ConsoleApp) -> list[str]:
    return list(fleet_table(app).shown) if app.is_screen_installed(FLEET_SCREEN) else []


def line_of(table: FleetTable, name: str) -> str:
    return next(ln for ln in table.plain().splitlines() if ln.startswith(name + " "))


async def test_overview_sorts_filters_and_shows_a_host_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = fleet_app(tmp_path, monkeypatch, ROWS)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        table = fleet_table(app)
        assert shown(app) == ["alpha", "bravo", "charlie", "delta"]
        await pilot.press("H")
        assert shown(app) == ["bravo", "delta", "alpha", "charlie"]
        await pilot.press("P")  # what needs a look first: the host down, the failure, the stall, then ready
        assert shown(app) == ["charlie", "bravo", "delta", "alpha"]
        await pilot.press("P")
        assert shown(app) == ["alpha", "delta", "bravo", "charlie"] and "reversed" in str(table.border_subtitle)

        charlie = line_of(table, "charlie")
        assert "HOST DOWN" in charlie and "SSH connection refused" in charlie
        assert "[bold]not markup[/bold]" in line_of(table, "bravo")  # server text drawn as it is
        alpha = line_of(table, "alpha")
        assert "ready" in alpha and "10m" in alpha and "586/1123G" in alpha and "87%" in alpha and "2400" in alpha
        assert "1m35s" in line_of(table, "delta")  # a moving phase keeps its seconds

        await pilot.press("slash")
        await pilot.press(*"box-a")
        assert shown(app) == ["delta", "bravo"] and "2 of 4" in str(table.border_title)
        await pilot.press("enter")  # keeps the filter, back on the table
        assert app.focused is table and shown(app) == ["delta", "bravo"]
        await pilot.press("escape")
        assert len(shown(app)) == 4 and isinstance(app.screen, FleetScreen)
        await pilot.press("slash", *"FAIL", "enter")  # by phase, any case
        assert shown(app) == ["bravo"]


async def test_enter_opens_the_deployment_and_escape_comes_back(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    app = fleet_app(tmp_path, monkeypatch, ROWS)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        await pilot.press("down", "down")
        assert fleet_table(app).cursor == "charlie"
        await pilot.press("enter")
        assert await until(pilot, lambda: not isinstance(app.screen, FleetScreen))
        assert app.deployment == "charlie" and app.engine is app.fleet.engines["charlie"]  # type: ignore[union-attr]
        # the one shown reads at the full pace; the rest only feed their rows, at the background pace
        assert [n for n, e in app.fleet.engines.items() if not e.background] == ["charlie"]  # type: ignore[union-attr]
        assert "charlie @ box-c" in app.sub_title and "esc" in app.sub_title
        # the console's key bar, not the overview's (it was drawn while the overview was on top)
        assert await until(pilot, lambda: "selected deployment" not in str(app.query_one("#keys").render()))
        bar = str(app.query_one("#keys").render())
        assert "Restart" in bar and "?" in bar, bar
        await pilot.press("escape")
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        assert fleet_table(app).cursor == "charlie"  # where it was
        await pilot.press("up", "enter")
        assert await until(pilot, lambda: app.deployment == "bravo" and not isinstance(app.screen, FleetScreen))
        assert [n for n, e in app.fleet.engines.items() if not e.background] == ["bravo"]  # type: ignore[union-attr]
        # the log filter first, then the overview
        await pilot.press("slash", *"x", "enter")
        await pilot.press("escape")
        assert not isinstance(app.screen, FleetScreen)
        await pilot.press("escape")
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))


async def test_acting_on_a_row_asks_the_confirmation_naming_deployment_and_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = fleet_app(tmp_path, monkeypatch, ROWS)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        await pilot.press("down", "down", "down")  # delta, on box-a
        await pilot.press("r")
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        assert screen.title_text == "Restart delta on box-a?"
        assert "deployment: delta" in screen.lines and "host:       box-a" in screen.lines
        await pilot.press("n")
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        assert app.deployment == "delta"


async def test_another_row_is_not_opened_while_a_restart_runs(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart's steps, result and rollback offer are drawn on the deployment shown: opening another row (Enter,
    or the `d` picker) while it runs would send them to the wrong deployment, so it is refused with a word."""
    app = fleet_app(tmp_path, monkeypatch, ROWS)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        app.restarting = True  # a restart of alpha, the deployment shown, is under way
        await pilot.press("down", "enter")  # bravo
        assert await until(pilot, lambda: any("a restart of alpha is running" in n
                                              for n in said(app)))
        assert app.deployment == "alpha" and isinstance(app.screen, FleetScreen)
        app.restarting = False
        await pilot.press("enter")
        assert await until(pilot, lambda: app.deployment == "bravo" and not isinstance(app.screen, FleetScreen))


async def test_the_picker_in_a_fleet_shows_every_deployments_phase_live(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine of a fleet runs: the `d` picker shows each one's phase now, none as "not watched"."""
    from textual.widgets import OptionList
    app = fleet_app(tmp_path, monkeypatch, ROWS)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        await pilot.press("enter")
        assert await until(pilot, lambda: not isinstance(app.screen, FleetScreen))
        await pilot.press("d")
        assert await until(pilot, lambda: bool(app.screen.query("#picker")))
        picker = app.screen.query_one("#picker", OptionList)
        prompts = [str(picker.get_option_at_index(i).prompt) for i in range(picker.option_count)]
        fleet = [p for p in prompts if p.split()[0] in NAMES]  # the built-in demo is no deployment of the fleet
        assert len(fleet) == 4 and all("(now)" in p for p in fleet), prompts


async def test_a_superseded_restart_is_the_rows_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """How this console's restart of a row ended, when the phase does not tell it (another run replaced the one it
    started), stays on that row's note until the next action there."""
    from tui.console.messages import RestartFinished
    from tui.model import Outcome, Result
    app = fleet_app(tmp_path, monkeypatch, ROWS)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)

        app.post_message(RestartFinished(Outcome(Result.SUPERSEDED, Phase.READY, "another run (a1b2c3) replaced the "
                                                 "one it started"), "restart", "r"))
        assert await until(pilot, lambda: "alpha" in app.action_notes)
        said = app.action_notes["alpha"]
        assert said.startswith("restart superseded at") and "another run (a1b2c3)" in said, said
        assert "bravo" not in app.action_notes
        # on the row: before the collectors' notes and a stall, after a host down and old data
        snap = _snap(stalled_for=90.0)
        assert row_for(snap, [0], "", said).note == said
        assert row_for(snap, [0], "SSH connection refused", said).note.startswith("SSH connection refused")
        assert row_for(replace(snap, stale="no news from box-b for 12 s"), [0], "", said).note.startswith("no news")
        app.post_message(RestartFinished(Outcome(Result.DONE, Phase.READY, "ready"), "restart", "r"))
        assert await until(pilot, lambda: "alpha" not in app.action_notes)


async def test_read_only_overview_refuses_with_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = fleet_app(tmp_path, monkeypatch, ROWS, cls=ConsoleApp)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        assert "read-only" in str(fleet_table(app).border_subtitle)
        for key in ("r", "s", "f"):
            await pilot.press(key)
            assert await until(pilot, lambda: len(said(app)) >= 1)
            assert isinstance(app.screen, FleetScreen)
        assert len(said(app)) == 3 and all("read-only" in n for n in said(app))


async def test_only_rows_whose_text_changed_are_redrawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = list(ROWS)
    app = fleet_app(tmp_path, monkeypatch, rows)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        table = fleet_table(app)
        screen.update_rows()
        assert table.redrawn == ()  # nothing moved
        rows[0] = replace(rows[0], tokens_per_s=2500.0)
        screen.update_rows()
        assert table.redrawn == ("alpha",)
        app.clock = lambda: NOW + 1  # a second on: only the moving phases' clocks (bravo's 30s, delta's 1m35s)
        screen.update_rows()
        assert set(table.redrawn) == {"bravo", "delta"}


async def test_a_tick_repaints_neither_the_whole_table_nor_the_console_under_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the terminal gets each second is the rows that moved: not the whole table (setting its border title
    repaints all of it), and not the regions of the console's panels under the overview (Textual composites the
    screens below a modal one, so a panel drawn there repaints the overview over it)."""
    rows = list(ROWS)
    app = fleet_app(tmp_path, monkeypatch, rows)
    async with app.run_test(size=(140, 30)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen) and len(shown(app)) == 4)
        screen, table = app.screen, fleet_table(app)
        assert isinstance(screen, FleetScreen)
        whole: list[object] = []
        repainted: list[object] = []
        table_refresh, screen_refresh = table.refresh, screen.refresh

        def table_spy(*regions: Any, **kw: Any) -> Any:
            if not regions:
                whole.append(kw)
            return table_refresh(*regions, **kw)

        def screen_spy(*regions: Any, **kw: Any) -> Any:
            repainted.append(regions)
            return screen_refresh(*regions, **kw)

        monkeypatch.setattr(table, "refresh", table_spy)
        monkeypatch.setattr(screen, "refresh", screen_spy)
        # Textual repaints the whole screen as it leaves it, as it comes back, and once more 50 ms after a mode
        # switch (App.switch_mode's delay_update): the repaints a switch costs. Switched away and back here, so that
        # all three are seen to happen before counting, rather than the last landing in the count on a loaded
        # machine (CI saw that)
        app.switch_mode(CONSOLE_MODE)
        app.switch_mode(FLEET_MODE)
        assert await until(pilot, lambda: repainted.count(()) >= 3)
        await settled(pilot)
        whole.clear()
        repainted.clear()
        for k in range(1, 4):
            app.clock = partial(float, NOW + 5 * k)  # the console's phase clock moves: its panel would be drawn
            rows[0] = replace(rows[0], tokens_per_s=2500.0 + k)
            app._tick()
            screen.update_rows()
            # read before the pause: the screen's own refresh timer may run its update during it, find nothing
            # new, and leave `redrawn` empty (CI, loaded)
            redrawn = table.redrawn
            await pilot.pause()
            assert "alpha" in redrawn
        assert whole == [] and repainted == [], (whole, repainted)
        # back on the console, what changed meanwhile is drawn
        await pilot.press("enter")
        assert await until(pilot, lambda: not isinstance(app.screen, FleetScreen))
        app.clock = partial(float, NOW + 30)
        app._tick()
        assert app._last_lifecycle == NOW + 30  # the phase clock drawn again at the first tick uncovered


# ---------------------------------------------------------------------------------------------------- real ones


def real_fleet_config(tmp: Path) -> Path:
    """Two simulated `process` deployments on this machine's host `simhost`, and one on an SSH host whose port
    nobody listens on."""
    ports = (free_port(), free_port())
    deps = {name: process_deployment(sim_command(port, tmp / "simgpu"), port, stop_timeout_s=20)
            for name, port in zip(("sim-a", "sim-b"), ports, strict=True)}
    ssh_config = tmp / "ssh_config"
    ssh_config.write_text(f"Host downhost\n    HostName 127.0.0.1\n    Port {free_port()}\n    User nobody\n")
    deps["far"] = parse_deployment({"host": "down", "manager": "systemd", "unit": "sglang.service",
                                    "endpoint": f"http://127.0.0.1:{free_port()}"})
    hosts = {"simhost": sim_host(tmp / "simgpu"), "down": HostConfig(ssh="downhost", ssh_config=str(ssh_config))}
    return ConfigFile(state_dir=tmp / "state", probe=ProbeConfig.model_validate({"interval_s": 0.3}), hosts=hosts,
                      deployments=deps).write(tmp / "config.toml")


@pytest.mark.slow
async def test_real_deployments_share_one_transport_and_a_down_host_holds_up_no_row(tmp_path: Path) -> None:
    settings = load(str(real_fleet_config(tmp_path)))
    app = ControlConsoleApp(settings, "sim-a", fleet=["sim-a", "sim-b", "far"])
    fleet = app.fleet
    assert fleet is not None
    a, b, far = (fleet.engines[n] for n in ("sim-a", "sim-b", "far"))
    assert a.transport is b.transport and a.gpu.shared is b.gpu.shared and far.transport is not a.transport
    async with app.run_test(size=(160, 30)) as pilot:
        try:
            table = fleet_table(app)

            def phase(name: str) -> str:
                row = table.rows.get(name)
                return row.phase_label if row else ""

            assert await until(pilot, lambda: phase("sim-a") == phase("sim-b") == "stopped", 15)
            assert await until(pilot, lambda: phase("far") == "host down", 15)
            assert "SSH connection refused" in line_of(table, "far")
            assert fleet.hosts["simhost"].gpus.followers == 2  # one GPU stream for both
            assert await until(pilot, lambda: (table.rows["sim-a"].mem_total_mib or 0) > 0, 15)

            # start sim-b from its row: the confirmation, then its row moves to ready; sim-a's stays stopped
            await pilot.press("H")  # by host: far (down), then sim-a, sim-b (simhost)
            while table.cursor != "sim-b":
                await pilot.press("down")
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Start sim-b on simhost?"
            await pilot.press("y")
            assert await until(pilot, lambda: phase("sim-b") == "ready", 40)
            assert phase("sim-a") == "stopped" and phase("far") == "host down"
            assert (table.rows["sim-b"].tokens_per_s is not None
                    or table.rows["sim-b"].mem_used_mib is not None)
        finally:
            await b.manager.stop()
            await fleet.close()


def test_bringup_opens_the_overview_only_with_several_deployments_and_none_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.console import run as console_run

    opened: list[ConsoleApp] = []

    def run(self: ConsoleApp, *args: Any, **kwargs: Any) -> int:
        opened.append(self)
        return 0

    monkeypatch.setattr(ControlConsoleApp, "run", run)
    monkeypatch.setattr(console_run.gc, "freeze", lambda: None)
    monkeypatch.setattr(console_run.signal, "signal", lambda *a: None)
    several = fleet_settings(tmp_path / "several", NAMES)
    assert console_run.run_app(several, None) == 0
    assert opened[-1].fleet is not None and list(opened[-1].fleet.engines) == list(NAMES)
    assert console_run.run_app(several, "bravo") == 0  # named: that deployment's console, as today
    assert opened[-1].fleet is None and opened[-1].deployment == "bravo"
    assert console_run.run_app(fleet_settings(tmp_path / "one", {"solo": "box-a"}), None) == 0
    assert opened[-1].fleet is None and opened[-1].deployment == "solo"


