"""A start's ready timeout and a scheduler's queue (ops/follow_run.py): `ready_timeout_s` counts from when the run
leaves the queue, so a restart behind other jobs never times out while Slurm keeps it waiting, unless the
deployment sets `queue_timeout_s`, which then bounds the queue alone. The engine here is a stand-in whose phases
the test moves; the real queue is tests/e2e/test_slurm_manager.py's."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tui.config.deployments import SlurmDeployment
from tui.model import Phase, Transition, UnitState
from tui.ops.engine_view import EngineView
from tui.ops.errors import RestartError
from tui.ops.follow_run import follow_new

OURS = UnitState(active="activating", sub="queued", invocation="7")


@dataclass
class State:
    phase: Phase
    invocation: str = "7"
    unit: UnitState = OURS
    failure: None = None
    stalled_for: float | None = None
    timeline: tuple[Transition, ...] = ()


@dataclass
class Engine:
    """What follow_new reads of an engine: its state, moved by the test."""
    dep: SlurmDeployment
    state: State = field(default_factory=lambda: State(Phase.QUEUED, timeline=(
        Transition(Phase.QUEUED, time.time(), "queued: Resources (the nodes or GPUs it asks for are held by "
                   "other jobs)"),)))
    name: str = "k26"

    async def poll_unit(self) -> UnitState:
        return self.state.unit

    def endpoint_mismatch(self) -> str:
        return ""

    def stall_note(self) -> str:
        return ""

    async def wait_changed(self, timeout: float) -> None:
        await asyncio.sleep(min(timeout, 0.02))

    async def settle_failure(self) -> None:
        return None


def slurm(**kw: Any) -> SlurmDeployment:
    return SlurmDeployment(host="cluster", command=["serve"], output_dir="/shared/b", **kw)


async def leave_queue_after(engine: Engine, queued_s: float, then: Phase) -> None:
    await asyncio.sleep(queued_s)
    engine.state = State(Phase.STARTING)
    await asyncio.sleep(0.05)
    engine.state = State(then)


async def test_queue_time_does_not_count_against_the_ready_timeout() -> None:
    engine = Engine(slurm())
    mover = asyncio.create_task(leave_queue_after(engine, 0.6, Phase.READY))  # queued 3x the ready timeout
    phase, failure = await follow_new(cast(EngineView, engine), OURS, 0.2, lambda step: None)
    await mover
    assert phase == Phase.READY and failure is None


async def test_the_ready_timeout_runs_from_the_jobs_start() -> None:
    engine = Engine(slurm())
    # queued longer than the ready timeout, then started and never ready: counted from the submission, the timeout
    # would end it while queued ("last phase: queued"); counted from the start, it ends it in loading
    mover = asyncio.create_task(leave_queue_after(engine, 0.6, Phase.LOADING))
    with pytest.raises(RestartError, match=r"not ready within 0.4 s \(last phase: loading\)"):
        await follow_new(cast(EngineView, engine), OURS, 0.4, lambda step: None)
    await mover


async def test_queue_timeout_s_bounds_the_queue_and_says_slurms_reason() -> None:
    engine = Engine(slurm(queue_timeout_s=0.2))
    with pytest.raises(RestartError) as e:
        await follow_new(cast(EngineView, engine), OURS, 60, lambda step: None)
    said = str(e.value)
    assert said.startswith("still queued after 0.2 s (the deployment's queue_timeout_s): queued: Resources"), said
    assert "`bringup stop k26` cancels it" in said


def test_queue_timeout_s_is_none_unless_set_and_only_a_slurm_deployment_has_it() -> None:
    assert slurm().queue_timeout is None and slurm(queue_timeout_s=600).queue_timeout == 600
    from tui.config.deployments import ProcessDeployment
    assert ProcessDeployment(command=["serve"]).queue_timeout is None
    with pytest.raises(ValueError, match="queue_timeout_s"):
        ProcessDeployment(command=["serve"], queue_timeout_s=5)  # type: ignore[call-arg]
