"""What the protocols above the engine may use of it: the engine seen through a `Protocol`, not its class.

The restart protocol drives an engine it never constructs; typing it against this view keeps `ops` free of the
engine's import (and of its collectors, its HTTP client, its streams), shows in one place how little a protocol
needs, and lets a test drive restart with any object of this shape. Every member here is one restart uses; a new
use is added here first, where a reviewer sees the interface grow.

Grouped by what the engine does for restart: the unit it follows, the GPUs it samples, and the deployment.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tui.config.deployments import DeploymentConfig
    from tui.config.settings import Settings
    from tui.lifecycle.gpu_room import StartNeed
    from tui.lifecycle.presets import FlagSpec
    from tui.lifecycle.reducer import LifecycleState
    from tui.lifecycle.release import Owner
    from tui.managers import Manager
    from tui.model import GpuSnapshot, UnitState


class FollowView(Protocol):
    """The unit and the reducer's reading of it: how restart follows a run to ready or failed."""

    @property
    def state(self) -> LifecycleState: ...

    async def poll_unit(self) -> UnitState:
        """A fresh reading of the unit, applied to the state (never one older than a reading already applied)."""
        ...

    def action(self, name: str) -> None:
        """Tell the reducer an action (stop, start) was asked for, and read the unit again soon."""
        ...

    async def wait_changed(self, timeout: float) -> None: ...

    async def settle_failure(self, timeout: float = 2.0, quiet: float = 0.3) -> None:
        """Let a failure's traceback arrive whole before it is reported."""
        ...

    def stall_note(self) -> str: ...

    def endpoint_mismatch(self) -> str: ...


class GpuView(Protocol):
    """The GPUs the deployment runs on, and what the release wait needs to tell "released" from "still held"."""

    @property
    def gpus(self) -> GpuSnapshot | None: ...

    @property
    def run_pids(self) -> set[int] | None: ...

    #: written by the release wait: once released, no panel may still say the previous run holds memory
    previous_pids: set[int]

    @property
    def baseline_mib(self) -> dict[int, float]: ...

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]: ...

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None: ...

    def observe_gpus(self, snap: GpuSnapshot) -> None:
        """Show a sample taken by the release wait itself, so a step and a panel never give two figures."""
        ...

    def save_baseline(self, snap: GpuSnapshot) -> None: ...

    async def others_on_gpus(self, pids: Collection[int], users: bool) -> dict[int, Owner]:
        """Whose `pids` are, of those that are someone else's: another deployment's on the host, or (`users`)
        another user's. The release wait names their memory and does not wait for it."""
        ...

    def start_need(self, argv: Sequence[str], snap: GpuSnapshot) -> StartNeed | None:
        """What a start of `argv` needs free on each of the deployment's GPUs; None when it is not known."""
        ...


class EngineView(FollowView, GpuView, Protocol):
    """Everything restart and stop use of one deployment's engine."""

    @property
    def name(self) -> str: ...

    @property
    def dep(self) -> DeploymentConfig: ...

    @property
    def settings(self) -> Settings:
        """The configuration the engine was built from: the release wait reads its hosts' `gpu_source` (a host that
        declares no GPU telemetry has nothing to wait for; any other without readings is refused)."""
        ...

    @property
    def manager(self) -> Manager: ...

    @property
    def flag_specs(self) -> Sequence[FlagSpec]: ...

    @property
    def offered_flags(self) -> Sequence[FlagSpec]: ...
