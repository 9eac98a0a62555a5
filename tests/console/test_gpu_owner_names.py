"""Issue 28, item 10: memory on a deployment's GPUs (or beside them) that another deployment configured on the same
host holds is named after that deployment, "held by deployment sim-d (pid 4242)", not "other processes". Who holds
what is worked out where attribution is (tui/lifecycle/release.py), from what the fleet knows of the host's other
deployments (tui/engine/fleet.py: their PIDs, and the GPUs of those running), and drawn by the GPU panel."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.helpers.config_toml import ConfigFile
from tests.helpers.gpu_snapshots import host_snapshot
from tests.helpers.pilot import until
from tests.helpers.ports import free_port
from tui.config.deployments import parse_deployment
from tui.config.parts import HostConfig
from tui.config.settings import Settings, load
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.engine.fleet import Fleet
from tui.engine.updates import GpusSampled
from tui.model import UnitObserved, UnitState
from tui.screens.fleet import FleetScreen
from widgets.gpus import GpuPanel

# ---------------------------------------------------------------------------------------------------- the fleet


def settings(tmp: Path) -> Settings:
    hosts = {h: HostConfig(gpu_source="none") for h in ("gpu-a", "gpu-b")}
    command = [sys.executable, "-c", "pass"]
    layout = {"sim-c": ("gpu-a", [0, 1]), "sim-d": ("gpu-a", [2, 3]), "sim-x": ("gpu-b", [2, 3])}
    deps = {n: parse_deployment({"host": h, "manager": "process", "command": command, "gpus": g,
                                 "endpoint": f"http://127.0.0.1:{free_port()}"})
            for n, (h, g) in layout.items()}
    return load(str(ConfigFile(state_dir=tmp / "state", hosts=hosts, deployments=deps).write(tmp / "config.toml")))


def run(fleet: Fleet, name: str, main_pid: int, pids: set[int]) -> None:
    """What the engine has read of a running deployment: its unit, and its run's processes."""
    e = fleet.engines[name]
    e.feed(UnitObserved(time.time(), UnitState(active="active", sub="running", main_pid=main_pid,
                                               invocation=f"{name}-run")))
    e.gpu.run_pids = set(pids)


def test_the_fleet_tells_each_engine_its_hosts_other_deployments(tmp_path: Path) -> None:
    fleet = Fleet(settings(tmp_path))
    run(fleet, "sim-c", 100, {100})
    run(fleet, "sim-d", 4243, {4242})
    run(fleet, "sim-x", 9999, {9999})  # on another host: its PIDs are another machine's
    n = fleet.neighbours("sim-c")
    assert dict(n.pids) == {4242: "sim-d", 4243: "sim-d"}
    assert dict(n.gpus) == {2: ("sim-d",), 3: ("sim-d",)}
    c = fleet.engines["sim-c"].gpu
    assert c.accept(host_snapshot())
    (d,) = c.named_holders(running=True)
    assert d.deployment == "sim-d" and d.gpus == (1, 2, 3)
    # sim-d stopped: its GPUs are no longer its by configuration alone
    fleet.engines["sim-d"].feed(UnitObserved(time.time(), UnitState(active="inactive", sub="dead")))
    assert fleet.neighbours("sim-c").gpus == {}


async def test_the_console_names_the_deployment_in_the_gpu_panel(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings(tmp_path), "sim-c", live=False, fleet=["sim-c", "sim-d", "sim-x"])
    fleet = app.fleet
    assert fleet is not None
    async with app.run_test(size=(120, 40)) as pilot:
        assert await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        await pilot.press("enter")  # sim-c's console
        assert await until(pilot, lambda: app.deployment == "sim-c" and not isinstance(app.screen, FleetScreen))
        run(fleet, "sim-c", 100, {100})
        run(fleet, "sim-d", 4243, {4242})
        snap = host_snapshot()
        w = fleet.engines["sim-c"]
        w.gpu.accept(snap)
        app.post_message(EngineUpdated(GpusSampled(snap, w.gpu.mem_history())))
        panel = app.query_one(GpuPanel)
        assert await until(pilot, lambda: "held by deployment sim-d" in panel.plain())
        said = " ".join(panel.plain().split())  # the notes wrap at the panel's width
        assert "GPU 1: 20.0 GiB held by deployment sim-d (pids 4242, 4243)" in said, said
        assert "held by other processes" not in said, said
