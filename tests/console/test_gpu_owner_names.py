"""Issue 28, item 10: memory on a deployment's GPUs (or beside them) that another deployment configured on the same
host holds is named after that deployment, "held by deployment sim-d (pid 4242)", not "other processes". Who holds
what is worked out where attribution is (tui/lifecycle/release.py), from what the fleet knows of the host's other
deployments (tui/engine/fleet.py: their PIDs, and the GPUs of those running), and drawn by the GPU panel."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.pilot import until
from tests.helpers.ports import free_port
from tui.app import ControlConsoleApp
from tui.config import HostConfig, Settings, load, parse_deployment
from tui.engine.fleet import Fleet
from tui.engine.updates import GpusSampled
from tui.lifecycle.release import NamedHolder, Neighbours, attribute, held_by_neighbours
from tui.messages import EngineUpdated
from tui.model import GpuProcess, GpuSample, GpuSnapshot, UnitObserved, UnitState
from tui.screens.fleet import FleetScreen
from widgets.gpus import GpuPanel, Row, rows_for

GIB = 1024.0
TOTAL = 143771.0


def text(row: Row) -> str:
    return "".join(t for t, _ in row)


def host_snapshot() -> GpuSnapshot:
    """Four GPUs of one host: 0-1 this deployment's (sim-c, pid 100), 2 held by sim-d's pid 4242, 3 by a process
    not listed (sim-d runs in a container: its PIDs are not the host's), 1 also by sim-d's 4243 (a conflict)."""
    used = {0: 60 * GIB, 1: 80 * GIB, 2: 70 * GIB, 3: 50 * GIB}
    gpus = tuple(GpuSample(index=i, mem_used_mib=used[i], mem_total_mib=TOTAL, util_pct=50.0) for i in range(4))
    procs = (GpuProcess(100, "python", 60 * GIB, gpu_index=0), GpuProcess(100, "python", 60 * GIB, gpu_index=1),
             GpuProcess(4243, "python", 20 * GIB, gpu_index=1), GpuProcess(4242, "python", 70 * GIB, gpu_index=2))
    return GpuSnapshot(at=time.time(), gpus=gpus, processes=procs)


# ---------------------------------------------------------------------------------------------------- pure


def test_holders_are_named_by_their_pids_then_by_the_gpus_of_running_deployments() -> None:
    snap = host_snapshot()
    neighbours = Neighbours(pids={4242: "sim-d", 4243: "sim-d"}, gpus={2: ("sim-d",), 3: ("sim-d",)})
    (d,) = held_by_neighbours(snap, neighbours, own={100})
    assert d.deployment == "sim-d" and d.pids == (4242, 4243)
    assert dict(d.by_gpu) == {1: 20 * GIB, 2: 70 * GIB, 3: 50 * GIB}  # GPU 3: by its GPU set, no process listed
    assert d.describe() == "held by deployment sim-d (pids 4242, 4243)"
    assert NamedHolder("sim-e", (7,), ((0, 1.0),)).describe() == "held by deployment sim-e (pid 7)"
    assert NamedHolder("sim-e", (), ((0, 1.0),)).describe() == "held by deployment sim-e (running there)"
    # a GPU two running deployments are configured on is neither's by its GPU set: it is not guessed
    both = Neighbours(pids={}, gpus={3: ("sim-d", "sim-e")})
    assert held_by_neighbours(snap, both, own={100}) == ()
    # a running deployment's own GPU is not put down to another's GPU set: the memory there may be its own
    # (its processes unseen: a container)
    overlap = Neighbours(gpus={0: ("sim-d",)})
    assert [h.gpus for h in held_by_neighbours(snap, overlap)] == [(0,)]
    assert held_by_neighbours(snap, overlap, own_gpus=[0, 1]) == ()
    # none known: nothing named (a console on one deployment, no fleet)
    assert held_by_neighbours(snap, Neighbours(), own={100}) == ()


def test_the_panel_names_the_deployment_instead_of_other_processes() -> None:
    snap = host_snapshot()
    neighbours = Neighbours(pids={4242: "sim-d", 4243: "sim-d"}, gpus={2: ("sim-d",), 3: ("sim-d",)})
    holders = held_by_neighbours(snap, neighbours, own={100})
    a = attribute(snap, [0, 1], current={100}, previous=set(), running=True, others=neighbours.pids)
    rows = rows_for(snap, {}, [0, 1], 100, False, 100, a, 0.9, holders)
    said = "\n".join(text(r) for r in rows)
    assert "held by other processes" not in said and "other processes:" not in said, said
    # on this deployment's own GPU: red, named
    mine = next(r for r in rows if text(r).startswith("GPU 1:"))
    assert text(mine) == "GPU 1: 20.0 GiB held by deployment sim-d (pids 4242, 4243)" and r_style(mine) == "bold red"
    # beside it: named, in the outside colour
    beside = next(r for r in rows if "outside the deployment" in text(r))
    assert text(beside) == ("GPU 2,3, outside the deployment: 120.0 GiB held by deployment sim-d "
                            "(pids 4242, 4243)"), text(beside)
    # without the fleet's knowledge: the generic words, as before
    plain = "\n".join(text(r) for r in rows_for(snap, {}, [0, 1], 100, False, 100,
                                                 attribute(snap, [0, 1], {100}, set(), True), 0.9))
    assert "held by other processes" in plain and "other processes: 20.0 GiB" in plain


def r_style(row: Row) -> str:
    (style,) = {s for _, s in row}
    return style


def test_known_neighbours_do_not_make_the_servers_pids_look_unreadable() -> None:
    """Every process on the GPUs being another deployment's is not "another PID namespace"."""
    snap = GpuSnapshot(at=0.0, gpus=(GpuSample(index=0, mem_used_mib=20 * GIB, mem_total_mib=TOTAL),),
                       processes=(GpuProcess(4242, "python", 20 * GIB, gpu_index=0),))
    assert "PID namespace" in attribute(snap, [0], {100}, set(), True).note
    assert attribute(snap, [0], {100}, set(), True, others={4242: "sim-d"}).note == ""


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


@pytest.mark.parametrize("pids", [(), (1, 2, 3, 4)])
def test_a_holders_pids_are_few_on_its_line(pids: tuple[int, ...]) -> None:
    said = NamedHolder("sim-d", pids, ((0, 1.0),)).describe()
    assert said.startswith("held by deployment sim-d (") and len(said) < 60
