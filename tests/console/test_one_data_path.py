"""Issue 49, item 2: the console draws from one data path. Everything its panels and header show comes in the
engine's pictures (the Snapshot: the deployment's GPUs, the other deployments' holdings, the server, what the
manager runs, the memory budget), pushed every second on the engine's clock grid (`PictureTaken`); the console's tick
reads nothing of the engine."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import console_states as cs
from tests.helpers.gpu_box import NAME, settings
from tests.helpers.pilot import until
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.engine import Engine
from tui.engine.updates import GpusSampled, PhaseChanged, PictureTaken
from tui.model import NamedHolder, Phase
from widgets.gpus import GpuPanel


async def test_the_console_draws_the_pushed_picture_and_reads_no_engine_at_its_tick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings(tmp_path)
    app = ControlConsoleApp(s, NAME, live=False)
    w = Engine(s, NAME, s.deployments[NAME])
    app.engine = w
    async with app.run_test(size=(120, 40)) as pilot:
        # from here on, the engine is asked for nothing: its pictures are what the console draws
        def asked(*_: object, **__: object) -> None:
            raise AssertionError("the console read the engine's snapshot")

        monkeypatch.setattr(w, "snapshot", asked)
        snap = replace(cs.snapshot(Phase.READY), target="process the-pushed-target")
        app.post_message(EngineUpdated(PhaseChanged(snap)))
        assert await until(pilot, lambda: "the-pushed-target" in str(app.sub_title))
        # GPU 0, the deployment's, also holding another deployment's memory: named because the picture says so
        held = (NamedHolder("sim-d", (4242,), ((0, 20 * 1024.0),)),)
        app.post_message(EngineUpdated(PictureTaken(replace(snap, deployment_gpus=(0,), gpu_holders=held))))
        app.post_message(EngineUpdated(GpusSampled(cs.gpus(70.0, 50), {})))
        panel = app.query_one(GpuPanel)
        assert await until(pilot, lambda: "held by deployment sim-d" in panel.plain())
        # two more of the console's seconds drawn (the lifecycle panel's clock): still nothing read of the engine
        drawn = app._last_lifecycle
        assert await until(pilot, lambda: app._last_lifecycle >= drawn + 2)
