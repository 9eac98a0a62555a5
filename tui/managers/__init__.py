"""Service managers: how a deployment's server is started, stopped, observed and configured.

`systemd` (a unit on a host), `process` (a command bringup supervises itself; the demo and hosts without
systemd) and `none` (observe only). The engine and the restart protocol only see this interface.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from tui.model import LogLine, UnitState


class ManagerError(Exception):
    """An action the manager could not perform; the message is shown to the user as is."""


class LockHeld(ManagerError):
    """Another bringup holds the deployment's restart lock."""


@dataclass(frozen=True, slots=True)
class LockInfo:
    who: str
    pid: int
    since: float
    purpose: str


class Manager(Protocol):
    kind: str
    #: what the confirmation dialog and messages call the thing being restarted
    target: str
    can_control: bool

    async def state(self) -> UnitState: ...

    async def start(self, argv: Sequence[str]) -> None: ...

    async def stop(self) -> None: ...

    def follow(self, unit: UnitState) -> AsyncIterator[LogLine]:
        """Log lines of the given invocation from its first line on, then live; ends when that run has ended."""
        ...

    async def read_argv(self) -> list[str]:
        """The server command line the next start will use."""
        ...

    async def write_argv(self, argv: Sequence[str]) -> None: ...

    async def read_saved_argv(self, which: str) -> list[str] | None:
        """`previous` (before the last write) or `ready` (the last argv that reached ready)."""
        ...

    async def save_argv(self, which: str, argv: Sequence[str]) -> None: ...

    def lock(self, purpose: str) -> AsyncLock: ...

    async def pids(self, unit: UnitState) -> set[int] | None:
        """Every process of the current run (the server and its children), or None if it cannot be known."""
        ...


class AsyncLock(Protocol):
    async def __aenter__(self) -> LockInfo: ...

    async def __aexit__(self, *exc: object) -> None: ...
