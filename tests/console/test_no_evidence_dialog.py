"""Pilot: on a host that gives no GPU readings, the console's restart dialog says why and offers nothing to confirm
(issue 47, finding 7: it promised "stop, wait for GPU memory release, start" and the restart left the server
stopped). Its one way on is the override, named as such, which asks again with the risk said.

The deployment is the sim's `process` deployment on a real Engine whose host's `nvidia_smi` is a path with no program
(a real exec that fails); the protocol's run is recorded instead of run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button

from tests.helpers.config_toml import ConfigFile
from tests.helpers.pilot import settled, until
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import process_deployment, sim_command
from tui.config.parts import HostConfig
from tui.config.settings import ProbeConfig, load
from tui.console.control import ControlConsoleApp
from tui.engine import Engine
from tui.model import Phase
from tui.ops import restart as protocol
from tui.screens.confirm import ConfirmScreen


def blind_console(tmp: Path) -> tuple[ControlConsoleApp, Engine]:
    port = free_port()
    dep = process_deployment(sim_command(port, tmp / "simgpu"), port, hide_flags=["--sim-", "--time-scale"])
    host = HostConfig(gpu_source="nvidia-smi", nvidia_smi=[str(tmp / "no-such-dir" / "nvidia-smi")])
    path = ConfigFile(state_dir=tmp / "state", probe=ProbeConfig(interval_s=0.3), hosts={"simhost": host},
                      deployments={"sim": dep}).write(tmp / "config.toml")
    settings = load(str(path))
    app = ControlConsoleApp(settings, "sim", live=False)
    w = Engine(settings, "sim", settings.deployments["sim"])
    app.engine = w
    return app, w


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The restarts the console asks for, with their keywords, recorded instead of run."""
    calls: list[dict[str, Any]] = []

    async def run(watch: Engine, target: protocol.ChangePlan | None, on_step: object,
                  **kw: Any) -> protocol.Outcome:
        calls.append(kw)
        return protocol.Outcome(protocol.Result.DONE, Phase.READY, "ready")

    monkeypatch.setattr(protocol, "run", run)
    return calls


def buttons(screen: ConfirmScreen) -> dict[str, str]:
    return {str(b.id): str(b.label) for b in screen.query(Button)}


async def test_the_restart_dialog_without_gpu_readings_offers_nothing_to_confirm(
        tmp_path: Path, runs: list[dict[str, Any]]) -> None:
    app, w = blind_console(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), timeout=20)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        body = "\n".join(dialog.lines)
        assert "no GPU readings" in dialog.title_text, dialog.title_text
        assert "cannot run" in body and "nothing was done" in body, body
        assert "wait for GPU memory release" not in body, body  # no promise it cannot keep
        shown = buttons(dialog)
        assert "yes" not in shown and not any("Yes" in label for label in shown.values()), shown
        assert shown.get("override") == "restart WITHOUT GPU evidence (w)", shown
        await pilot.press("y")  # nothing to confirm: y does nothing
        await settled(pilot)
        assert app.screen is dialog and runs == []

        await pilot.press("w")  # the named override: asked again, with the risk said
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen is not dialog,
                           timeout=20)
        again = app.screen
        assert isinstance(again, ConfirmScreen) and "yes" in buttons(again)
        assert "WITHOUT GPU evidence" in "\n".join(again.lines) and "NOT" in "\n".join(again.lines)
        await pilot.press("y")
        assert await until(pilot, lambda: len(runs) == 1), runs
        assert runs[0].get("without_gpu_evidence") is True, runs
    await w.close()


async def test_closing_the_refusal_does_nothing(tmp_path: Path, runs: list[dict[str, Any]]) -> None:
    app, w = blind_console(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), timeout=20)
        await pilot.press("n")
        await settled(pilot)
        assert not isinstance(app.screen, ConfirmScreen) and runs == []
    await w.close()
