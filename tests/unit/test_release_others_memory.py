"""The rules behind issue 51's restart beside another deployment's server (the end-to-end case is
tests/e2e/test_release_others_memory.py): memory someone else holds on the deployment's GPUs is named and not waited
for; the start goes on when the room left is enough for it and is refused at once when it is not; processes no one
is known to own are waited for, named; a stopped deployment holds no one else's memory; a transaction on a stopped
deployment never speaks of "the running server"."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence

import pytest

from tui.config.deployments import ProcessDeployment
from tui.config.parts import HostConfig
from tui.engine.gpu_owners import _uid, same_machine
from tui.lifecycle.gpu_room import free_beside, free_now, room_for, start_need
from tui.lifecycle.presets.sglang_metrics import MEMORY_BUDGET
from tui.lifecycle.release import Owner, OwnerKind, own_memory_mib, release_status
from tui.lifecycle.run_record import GpuStep, RunRecord
from tui.model import Attribution, GpuProcess, GpuSample, GpuSnapshot, Phase, Snapshot, Step, UnitState
from tui.ops.errors import HeldByOthers
from tui.ops.guard import Progress
from tui.ops.release_wait import wait_for_release
from widgets.fleet_rows import row_for

GIB = 1024.0
TOTAL = 143771.0  # an H200's memory as nvidia-smi says it
SIM_B = Owner(OwnerKind.DEPLOYMENT, "sim-b")


def two_gpus(b_gib: float, *, unknown_gib: float = 0.0) -> GpuSnapshot:
    """GPUs 0-1, each holding `b_gib` of sim-b's pid 4242 (and `unknown_gib` of a pid 777 no one is known to own)."""
    procs = [GpuProcess(4242, "python", b_gib * GIB, gpu_index=i) for i in (0, 1)]
    procs += [GpuProcess(777, "python", unknown_gib * GIB, gpu_index=0)] if unknown_gib else []
    gpus = tuple(GpuSample(index=i, mem_used_mib=(b_gib + (unknown_gib if i == 0 else 0)) * GIB,
                           mem_total_mib=TOTAL, util_pct=60.0) for i in (0, 1))
    return GpuSnapshot(at=time.time(), gpus=gpus, processes=tuple(procs))


# ---------------------------------------------------------------------------------------------------- the rule


def test_a_baseline_taken_before_the_other_started_does_not_make_its_memory_ours() -> None:
    snap = two_gpus(60.0)
    empty = {0: 0.0, 1: 0.0}  # taken before this deployment's last start, when the GPUs were empty
    before = release_status(snap, [0, 1], set(), empty, 512)
    # what was waited out (now with the holder named)
    assert not before.released and before.describe() == ("120.0 GiB held on GPU 0,1 by PID 4242 (no other "
                                                          "deployment's or user's that bringup knows)"), before
    st = release_status(snap, [0, 1], set(), empty, 512, others={4242: SIM_B})
    assert st.released, st
    (o,) = st.others
    assert o.owner == SIM_B and o.pids == (4242,) and o.describe() == \
        "120.0 GiB on GPU 0,1 held by deployment sim-b (pid 4242)"


def test_a_process_of_no_one_known_is_waited_for_and_named() -> None:
    st = release_status(two_gpus(60.0, unknown_gib=10.0), [0, 1], set(), {0: 0.0, 1: 0.0}, 512,
                        others={4242: SIM_B})
    assert not st.released and st.unknown == (777,), st
    assert st.describe() == ("10.0 GiB held on GPU 0 by PID 777 (no other deployment's or user's that bringup "
                             "knows)"), st.describe()


def test_the_old_runs_own_processes_stay_ours_whatever_the_others() -> None:
    st = release_status(two_gpus(60.0), [0, 1], {4242}, {}, 512, others={4242: SIM_B})
    assert not st.released and st.holders == (4242,) and not st.others


# ---------------------------------------------------------------------------------------------------- the room


def run(mib: float | None, argv: Sequence[str] = ()) -> RunRecord:
    steps = (GpuStep(1.0, "ready", None, this_run_mib=mib),) if mib is not None else ()
    return RunRecord("inv", "sim-a", 1.0, "h", argv=tuple(argv), gpu_steps=steps)


def test_a_start_needs_what_its_last_ready_run_held_unless_its_budget_changed() -> None:
    snap = two_gpus(60.0)
    need = start_need([run(100 * GIB)], ["--tp-size", "2"], MEMORY_BUDGET, snap, [0, 1])
    assert need is not None and dict(need.per_gpu) == {0: 50 * GIB, 1: 50 * GIB}
    assert need.words() == "50.0 GiB a GPU (its last ready run's)" and need.flag == "--mem-fraction-static"
    changed = start_need([run(100 * GIB)], ["--mem-fraction-static", "0.5"], MEMORY_BUDGET, snap, [0, 1])
    assert changed is not None and changed.per_gpu[0] == pytest.approx(0.5 * TOTAL), changed
    assert changed.basis == "--mem-fraction-static 0.5 of each GPU's memory"
    default = start_need([run(None)], [], MEMORY_BUDGET, snap, [0, 1])
    assert default is not None and default.basis == "--mem-fraction-static 0.9, its default, of each GPU's memory"
    assert start_need([], [], None, snap, [0, 1]) is None  # neither known: not known


def test_the_room_is_each_gpus_free_memory_against_the_need() -> None:
    snap = two_gpus(60.0)
    st = release_status(snap, [0, 1], set(), {}, 512, others={4242: SIM_B})
    need = start_need([run(100 * GIB)], [], MEMORY_BUDGET, snap, [0, 1])
    assert need is not None
    fits = room_for(need, free_now(snap, [0, 1]), snap)
    assert fits.fits and fits.words() == f"{(TOTAL - 60 * GIB) / GIB:.1f} GiB free on GPU 0,1", fits
    big = start_need([run(200 * GIB)], [], MEMORY_BUDGET, snap, [0, 1])
    assert big is not None
    short = room_for(big, free_beside(snap, [0, 1], st.others), snap)
    assert not short.fits and short.short == (0, 1)


# ---------------------------------------------------------------------------------------------------- the wait


class _Settings:
    def host(self, name: str) -> HostConfig:
        return HostConfig(gpu_source="nvidia-smi")


class Engine:
    """The release wait's view of an engine (tui/ops/engine_view.py) on GPUs 0-1 beside sim-b's pid 4242."""

    name = "sim-a"
    settings = _Settings()

    def __init__(self, snap: GpuSnapshot, need_gib: float | None) -> None:
        self.dep = ProcessDeployment(host="h", manager="process", command=["server"], gpus=[0, 1],
                                     release_tolerance_mib=512)
        self.snap = snap
        self.need_gib = need_gib
        self.gpus: GpuSnapshot | None = None
        self.baseline_mib: dict[int, float] = {0: 0.0, 1: 0.0}
        self.previous_pids: set[int] = set()
        self.run_pids: set[int] | None = set()
        self.asked: list[tuple[set[int], bool]] = []

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]:
        return [0, 1]

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None:
        return self.snap

    def observe_gpus(self, snap: GpuSnapshot) -> None:
        self.gpus = snap

    async def others_on_gpus(self, pids: Collection[int], users: bool) -> dict[int, Owner]:
        self.asked.append((set(pids), users))
        return {4242: SIM_B} if 4242 in pids else {}

    def start_need(self, argv: Sequence[str], snap: GpuSnapshot) -> object:
        return None if self.need_gib is None else start_need([run(2 * self.need_gib * GIB)], argv, MEMORY_BUDGET,
                                                             snap, [0, 1])


async def test_the_others_memory_is_not_waited_for_when_the_start_fits_beside_it() -> None:
    eng = Engine(two_gpus(60.0), need_gib=50.0)
    steps: list[Step] = []
    t0 = time.monotonic()
    snap = await wait_for_release(eng, set(), steps.append, timeout=30.0, argv=[])  # type: ignore[arg-type]
    assert snap is not None and time.monotonic() - t0 < 5.0
    assert eng.asked == [({4242}, True)]  # nothing of its own ran: another user's would count too
    (done,) = steps
    assert done.status == "done", steps
    assert done.detail.startswith("no GPU memory of sim-a's to wait for; not waited for: 120.0 GiB on GPU 0,1 held "
                                  "by deployment sim-b (pid 4242), not sim-a's;"), done.detail
    assert "enough for the start's 50.0 GiB a GPU (its last ready run's)" in done.detail, done.detail


async def test_a_start_that_cannot_fit_beside_it_is_refused_at_once_naming_it() -> None:
    eng = Engine(two_gpus(100.0), need_gib=80.0)
    steps: list[Step] = []
    t0 = time.monotonic()
    with pytest.raises(HeldByOthers) as e:
        await wait_for_release(eng, set(), steps.append, timeout=30.0, argv=[])  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 5.0
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("not started: 200.0 GiB on GPU 0,1 held by deployment sim-b (pid 4242)")
    assert "needs 80.0 GiB a GPU" in msg and "`bringup stop sim-b` frees its memory" in msg, msg
    assert steps[-1].status == "failed" and steps[-1].detail == msg


async def test_a_need_not_known_goes_on_and_says_so() -> None:
    eng = Engine(two_gpus(100.0), need_gib=None)
    steps: list[Step] = []
    assert await wait_for_release(eng, set(), steps.append, timeout=30.0, argv=[]) is not None  # type: ignore[arg-type]
    assert "how much the start needs is not known" in steps[-1].detail, steps


async def test_a_stop_does_not_wait_for_the_others_memory_either() -> None:
    eng = Engine(two_gpus(60.0), need_gib=500.0)
    steps: list[Step] = []
    snap = await wait_for_release(eng, {31}, steps.append, timeout=30.0, purpose="stop")  # type: ignore[arg-type]
    assert snap is not None and "not waited for" in steps[-1].detail and "needs" not in steps[-1].detail, steps
    assert eng.asked == [({4242}, False)]  # its run ran: a process of another user may be its own


# ---------------------------------------------------------------------------------------------------- who owns


def test_a_uid_is_read_from_proc_status() -> None:
    assert _uid(b"Name:\tsleep\nUid:\t65534\t65534\t65534\t65534\n") == 65534
    assert _uid(b"Uid:\t\xb2\n") is None and _uid(None) is None and _uid(b"Name: x\n") is None
    local, other = HostConfig(), HostConfig(ssh="gpu-a")
    assert same_machine(local, HostConfig()) and same_machine(other, HostConfig(ssh="gpu-a"))
    assert not same_machine(local, other)


# ---------------------------------------------------------------------------------------------------- what is shown


def test_a_stopped_deployment_holds_no_one_elses_memory() -> None:
    stopped = UnitState(active="inactive", sub="dead")
    assert own_memory_mib(stopped, Attribution(0.0, 0.0, 120 * GIB, ())) == 0.0
    assert own_memory_mib(stopped, Attribution(0.0, 8 * GIB, 120 * GIB, (0,))) == 8 * GIB  # its last run, releasing
    assert own_memory_mib(UnitState(active="active", sub="running", main_pid=5), None) is None
    assert own_memory_mib(UnitState(active="failed"), None) is None  # a crash may have left processes behind
    assert own_memory_mib(None, None) is None
    snap = Snapshot(deployment="sim-a", host="simhost", phase=Phase.STOPPED, invocation="", timeline=(),
                    failure=None, stalled_for=None, unit=stopped, gpus=two_gpus(60.0), throughput=None,
                    attribution=Attribution(0.0, 0.0, 120 * GIB, ()))
    row = row_for(snap, [0, 1])
    assert row.mem_used_mib == 0.0 and row.mem_total_mib == 2 * TOTAL and row.util_pct is None, row


def test_a_transaction_on_a_stopped_deployment_never_speaks_of_its_running_server() -> None:
    p = Progress("sim-a", flags="+ --mem-fraction-static 0.85", was_running=False)
    assert p.left_in() == ("flags written (+ --mem-fraction-static 0.85), it was not running, and is not: the new "
                           "flags apply at its next start (`bringup start sim-a`)")
    assert "running server still has the old flags" in Progress("sim-a", flags="x").left_in()
