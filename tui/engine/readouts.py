"""What other code reads of the engine, read through it: what the restart protocol, `bringup status`, `bringup
wait` and the tests read as `engine.gpus`, `engine.run_pids`, `engine.unit_seen_at`, `engine.poll_unit()`... Each
is the state of the part that keeps it (tui/engine/gpus.py, throughput.py, unit.py) or a plain function of the
engine's state (tui/engine/view.py); these names keep one place to ask for them while the protocols above the
engine are given narrower interfaces of their own."""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from tui.config import DeploymentConfig
from tui.lifecycle.flags import current_values
from tui.lifecycle.presets import FlagSpec
from tui.lifecycle.reducer import LifecycleState
from tui.managers import LockInfo, Manager
from tui.model import Attribution, Failure, GpuSnapshot, ProbeResult, ThroughputSample, UnitState

from . import view
from .gpus import GpuHistory, GpuTracker
from .throughput import MetricsState, ThroughputTracker
from .unit import UnitFollower


class StreamReadouts:
    name: str
    dep: DeploymentConfig
    manager: Manager
    flag_specs: list[FlagSpec]
    state: LifecycleState
    listening: tuple[str, int] | None
    last_probe: ProbeResult | None
    gpu: GpuTracker
    tput: ThroughputTracker
    unit_follower: UnitFollower

    # ------------------------------------------------------------------ the unit (tui/engine/unit.py) and its flags

    @property
    def unit_seen_at(self) -> float | None:
        return self.unit_follower.seen_at

    @property
    def other_holder(self) -> LockInfo | None:
        return self.unit_follower.other_holder

    @property
    def permanent_error(self) -> Exception | None:
        return self.unit_follower.permanent_error

    async def poll_unit(self) -> UnitState:
        return await self.unit_follower.poll()

    async def replay_history(self, invocation: str, ended: bool = False) -> None:
        await self.unit_follower.replay_history(invocation, ended)

    async def refresh_pids(self, unit: UnitState) -> None:
        await self.unit_follower.refresh_pids(unit)

    async def refresh_holder(self) -> None:
        await self.unit_follower.refresh_holder()

    async def argv(self) -> list[str]:
        return await self.manager.read_argv()

    async def flag_values(self) -> dict[str, str | None]:
        return current_values(await self.argv(), self.flag_specs)

    # ------------------------------------------------------------------ words for the state (tui/engine/view.py)

    def named(self, failure: Failure | None) -> Failure | None:
        """The failure with this deployment's name in its hint, where the hint says `<deployment>`: a command to
        copy should be one that runs."""
        if failure is None or "<deployment>" not in failure.hint:
            return failure
        return replace(failure, hint=failure.hint.replace("<deployment>", self.name))

    def endpoint_mismatch(self) -> str:
        return view.endpoint_mismatch(self.listening, self.state.invocation, self.dep.endpoint)

    def stall_note(self) -> str:
        return view.stall_note(self.state)

    def current_probe(self) -> ProbeResult | None:
        return view.current_probe(self.last_probe, self.state)

    # ------------------------------------------------------------------ GPUs (tui/engine/gpus.py)

    @property
    def gpus(self) -> GpuSnapshot | None:
        return self.gpu.latest

    @gpus.setter
    def gpus(self, snap: GpuSnapshot | None) -> None:  # a one-shot reading (`bringup status`)
        self.gpu.latest = snap

    @property
    def gpu_history(self) -> dict[int, GpuHistory]:
        return self.gpu.history

    @property
    def run_pids(self) -> set[int] | None:
        return self.gpu.run_pids

    @property
    def previous_pids(self) -> set[int]:
        return self.gpu.previous_pids

    @previous_pids.setter
    def previous_pids(self, pids: set[int]) -> None:  # released: no panel may still say the old run holds memory
        self.gpu.previous_pids = pids

    @property
    def baseline_mib(self) -> dict[int, float]:
        return self.gpu.baseline_mib

    def save_baseline(self, snap: GpuSnapshot) -> None:
        self.gpu.save_baseline(snap)

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None:
        return await self.gpu.fresh(max_age)

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]:
        return self.gpu.deployment_gpus(snap)

    def attribution(self) -> Attribution | None:
        unit = self.state.unit
        return self.gpu.attribution(running=unit is not None and unit.running)

    # ------------------------------------------------------------------ throughput (tui/engine/throughput.py)

    @property
    def throughput(self) -> ThroughputSample | None:
        return self.tput.latest

    @property
    def tps_history(self) -> deque[tuple[float, float]]:
        return self.tput.history

    @property
    def metrics_state(self) -> MetricsState:
        return self.tput.metrics
