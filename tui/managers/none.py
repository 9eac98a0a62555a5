"""The `none` manager: observe only. No start, stop or flags; the lifecycle comes from probes alone."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from tui.managers import AsyncLock, ManagerError, Report, unreported
from tui.model import LogLine, UnitState


class NoManager:
    kind = "none"
    target = "an unmanaged server"
    can_control = False
    sees_run = False

    async def state(self) -> UnitState:
        return UnitState(active="unknown")

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        raise ManagerError("this deployment is observe-only (manager = 'none'): bringup cannot start it")

    async def stop(self, report: Report = unreported) -> None:
        raise ManagerError("this deployment is observe-only (manager = 'none'): bringup cannot stop it")

    async def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        return
        yield

    async def read_argv(self) -> list[str]:
        return []

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None:
        raise ManagerError("this deployment is observe-only (manager = 'none'): its flags cannot be changed")

    async def read_saved_argv(self, which: str) -> list[str] | None:
        return None

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        return None

    async def pids(self, unit: UnitState) -> set[int] | None:
        return None

    def lock(self, purpose: str, change: str = "") -> AsyncLock:
        raise ManagerError("this deployment is observe-only (manager = 'none')")
