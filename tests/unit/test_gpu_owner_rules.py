"""Who holds a GPU's memory, named (tui/engine/gpus.py, widgets/gpus.py): by the holders' pids, then by the GPUs of
running deployments; the panel naming the deployment instead of other processes; known neighbours not making the
server's pids look unreadable; a holder's pids few on its line. In the console: tests/console/
test_gpu_owner_names.py."""

from __future__ import annotations

import pytest

from tests.helpers.gpu_snapshots import GIB, TOTAL, host_snapshot, text
from tui.lifecycle.release import Neighbours, attribute, held_by_neighbours
from tui.model import GpuProcess, GpuSample, GpuSnapshot, NamedHolder
from widgets.gpus import Row, rows_for


def r_style(row: Row) -> str:
    (style,) = {s for _, s in row}
    return style


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


def test_known_neighbours_do_not_make_the_servers_pids_look_unreadable() -> None:
    """Every process on the GPUs being another deployment's is not "another PID namespace"."""
    snap = GpuSnapshot(at=0.0, gpus=(GpuSample(index=0, mem_used_mib=20 * GIB, mem_total_mib=TOTAL),),
                       processes=(GpuProcess(4242, "python", 20 * GIB, gpu_index=0),))
    assert "PID namespace" in attribute(snap, [0], {100}, set(), True).note
    assert attribute(snap, [0], {100}, set(), True, others={4242: "sim-d"}).note == ""


@pytest.mark.parametrize("pids", [(), (1, 2, 3, 4)])
def test_a_holders_pids_are_few_on_its_line(pids: tuple[int, ...]) -> None:
    said = NamedHolder("sim-d", pids, ((0, 1.0),)).describe()
    assert said.startswith("held by deployment sim-d (") and len(said) < 60
