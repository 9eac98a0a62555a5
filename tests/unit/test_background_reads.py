"""What a deployment in a fleet's background reads, and when: its run's processes and its lock's holder are each a
round trip to the host per deployment, so once the run is ready they are read when there is news (a process no
one has placed on its GPUs, a unit that changed) and slowly besides; on screen, or while another bringup holds
the lock, as often as ever. The whole fleet's cost is benchmarks/fleet_ssh_cost.py's; the engines on real hosts
read through these same paths in tests/e2e (test_truth.py: another holder seen)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui.config.parts import HostConfig
from tui.engine.gpus import BACKGROUND_PIDS_S, SETTLED_PIDS_S, SPAWNING_PIDS_S, GpuTracker
from tui.engine.unit import BACKGROUND_HOLDER_S, HOLDER_S, UnitFollower
from tui.lifecycle.reducer import LifecycleState
from tui.lifecycle.release import Neighbours
from tui.model import GpuProcess, GpuSample, GpuSnapshot, LockInfo, UnitState
from tui.transport.local import LocalTransport

RUN = UnitState(active="active", sub="running", main_pid=100, invocation="inv-1")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class PidsManager:
    can_control = True

    def __init__(self) -> None:
        self.reads = 0
        self.procs: set[int] | None = {100, 101}

    async def pids(self, unit: UnitState) -> set[int] | None:
        self.reads += 1
        return None if self.procs is None else set(self.procs)


def tracker(tmp_path: Path, clock: Clock) -> GpuTracker:
    t = GpuTracker(HostConfig(), LocalTransport(), [0, 1], tmp_path / "baseline.json")
    t.clock = clock
    return t


def on_gpus(t: GpuTracker, *procs: tuple[int, int]) -> None:
    t.accept(GpuSnapshot(at=1.0, gpus=(GpuSample(index=0), GpuSample(index=1), GpuSample(index=2)),
                         processes=tuple(GpuProcess(pid=p, name="python3", used_mib=1000.0, gpu_index=g)
                                         for p, g in procs)))


def test_a_ready_run_reads_its_processes_again_only_for_a_stranger_on_its_gpus_or_slowly(tmp_path: Path) -> None:
    clock, m = Clock(), PidsManager()
    t = tracker(tmp_path, clock)
    t.background = lambda: True
    on_gpus(t, (100, 0), (101, 1))

    async def go() -> None:
        await t.refresh_pids(m, RUN)  # a new run: read at once
        assert (m.reads, t.run_pids) == (1, {100, 101})
        clock.now += SPAWNING_PIDS_S
        await t.refresh_pids(m, RUN)  # still spawning: the spawning pace
        assert m.reads == 2
        for _ in range(10):  # ready, its own processes on its GPUs: nothing to ask
            clock.now += SPAWNING_PIDS_S
            await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 2
        # a process on another GPU, not the deployment's, is none of its business
        on_gpus(t, (100, 0), (101, 1), (300, 2))
        clock.now += SPAWNING_PIDS_S
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 2
        # one on its GPU that no one has placed: a worker respawned? asked once, at the spawning pace at most
        m.procs = {100, 101, 102}
        on_gpus(t, (100, 0), (101, 1), (102, 1))
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 3 and t.run_pids == {100, 101, 102}
        # a stranger that stays a stranger (another user's, another namespace's) is asked about once
        on_gpus(t, (100, 0), (101, 1), (102, 1), (400, 0))
        clock.now += SPAWNING_PIDS_S
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 4
        for _ in range(5):
            clock.now += SPAWNING_PIDS_S
            await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 4
        # a neighbour's process, placed by the fleet, is no stranger
        t.neighbours = lambda: Neighbours(pids={500: "other"})
        on_gpus(t, (100, 0), (101, 1), (102, 1), (400, 0), (500, 0))
        clock.now += SPAWNING_PIDS_S
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 4
        clock.now += BACKGROUND_PIDS_S  # and slowly besides
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 5
        # a new run is read at once, whatever the pace
        await t.refresh_pids(m, UnitState(active="active", main_pid=200, invocation="inv-2"), settled=True)
        assert m.reads == 6 and t.previous_pids == {100, 101, 102}

    asyncio.run(go())


def test_on_screen_a_ready_run_is_read_at_the_settled_pace_and_a_reading_that_cannot_say_is_retried(
        tmp_path: Path) -> None:
    clock, m = Clock(), PidsManager()
    t = tracker(tmp_path, clock)
    on_gpus(t, (100, 0), (101, 1))

    async def go() -> None:
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 1
        clock.now += SETTLED_PIDS_S - 1
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 1
        clock.now += 1
        m.procs = None  # the cgroup could not be read: nothing is known, so nothing is placed
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 2 and t.run_pids is None
        clock.now += SPAWNING_PIDS_S
        m.procs = {100, 101}
        await t.refresh_pids(m, RUN, settled=True)
        assert m.reads == 3 and t.run_pids == {100, 101}

    asyncio.run(go())


class HolderLock:
    def __init__(self, m: HolderManager) -> None:
        self.m = m

    async def holder(self) -> LockInfo | None:
        self.m.reads += 1
        if self.m.fail:
            raise OSError("link down")
        return self.m.holder


class HolderManager:
    can_control = True

    def __init__(self) -> None:
        self.reads = 0
        self.holder: LockInfo | None = None
        self.fail = False

    def lock(self, purpose: str, change: str = "") -> HolderLock:
        return HolderLock(self)


def follower(m: HolderManager, *, background: bool, seen: list[LockInfo | None]) -> UnitFollower:
    async def no_pids(unit: UnitState) -> None:
        return None

    f = UnitFollower(m, LifecycleState, None,  # type: ignore[arg-type]  # errors: not reached by these reads
                     feed=lambda e: None, read_back=lambda lines, ended: None, run_changed=lambda at: None,
                     holder_changed=seen.append, pids=no_pids, followed=lambda: "",
                     background=lambda: background, watch_holders=lambda: False, host_name="gpu-box")
    return f


def test_a_background_deployment_reads_its_holder_when_its_unit_changes_or_slowly() -> None:
    clock, m, seen = Clock(), HolderManager(), []
    f = follower(m, background=True, seen=seen)
    f.clock = clock

    async def go() -> None:
        await f.refresh_holder(RUN)  # first sight: read
        assert m.reads == 1
        for _ in range(10):  # the same unit, read every 2 s: no news, no read
            clock.now += 2.0
            await f.refresh_holder(RUN)
        assert m.reads == 1
        # another bringup's restart stops it: read at once, and its holder named
        m.holder = LockInfo(who="alice@gpu-box", pid=4242, since=1.0, purpose="restart", token="t")
        await f.refresh_holder(UnitState(active="deactivating", sub="stop-sigterm", main_pid=100,
                                         invocation="inv-1"))
        assert m.reads == 2 and seen == [m.holder]
        # while someone else holds it, its steps are read at the foreground pace
        clock.now += HOLDER_S
        await f.refresh_holder(UnitState(active="deactivating", sub="stop-sigterm", main_pid=100,
                                         invocation="inv-1"))
        assert m.reads == 3
        m.holder = None
        clock.now += HOLDER_S
        await f.refresh_holder(RUN)
        assert m.reads == 4 and seen[-1] is None
        clock.now += HOLDER_S
        await f.refresh_holder(RUN)  # free again, nothing changed: back to the slow pace
        assert m.reads == 4
        clock.now += BACKGROUND_HOLDER_S
        await f.refresh_holder(RUN)
        assert m.reads == 5
        # a change whose holder could not be read is read for again at the next reading, not 30 s later
        m.fail = True
        stopping = UnitState(active="deactivating", sub="stop-sigterm", main_pid=100, invocation="inv-1")
        await f.refresh_holder(stopping)
        assert m.reads == 6
        m.fail = False
        clock.now += 2.0
        await f.refresh_holder(stopping)
        assert m.reads == 7

    asyncio.run(go())


def test_a_deployment_on_screen_reads_its_holder_at_the_foreground_pace() -> None:
    clock, m, seen = Clock(), HolderManager(), []
    f = follower(m, background=False, seen=seen)
    f.clock = clock

    async def go() -> None:
        for _ in range(5):
            await f.refresh_holder(RUN)
            clock.now += HOLDER_S
        assert m.reads == 5

    asyncio.run(go())
