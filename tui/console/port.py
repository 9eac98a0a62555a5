"""What the console uses of an engine and of a fleet: `Protocol`s, not their classes.

The console draws from what the engine tells it (the `Snapshot` inside its typed updates, tui/engine/updates.py) and
acts through the protocols (tui/ops/), which see an engine through their own small Protocols; this module adds what
the console itself needs: to listen, to be told the picture every second, to start and close, a catch-up picture
when it opens an engine that has run for a while. The concrete engine and fleet are built in one place
(tui/console/engines.py); `lint-imports` keeps the rest of the console, the screens and the widgets off `tui.engine`
(but for its updates), so a new use of the engine is added here first, where a reviewer sees the interface grow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from tui.ops.change import FlagView
from tui.ops.engine_view import EngineView
from tui.ops.evidence import EvidenceView

if TYPE_CHECKING:
    from tui.engine.updates import LogsRead, Update
    from tui.lifecycle.presets import FlagSpec
    from tui.model import LockInfo, Snapshot
    from tui.transport import Transport


class RecordFlush(Protocol):
    async def flush(self) -> None:
        """The run's newest record, written off the loop, on file."""
        ...


class ConsoleEngine(EngineView, FlagView, EvidenceView, Protocol):
    """One deployment's engine as the console drives it: what restart, stop and a flag change use (the protocols'
    views), and what the console itself uses."""

    #: listening: the console hears the updates of the engine it shows, and no other's
    def subscribe(self, fn: Callable[[Update], None]) -> None: ...

    def unsubscribe(self, fn: Callable[[Update], None]) -> None: ...

    #: told the whole picture every second (`PictureTaken`) while the console shows it
    pictures: bool
    #: the console's pause: the engine's readings that only feed figures wait too
    paused: bool
    #: a fleet's engine the console does not show: its figures come slower
    background: bool

    @property
    def host_name(self) -> str: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def history(self) -> RecordFlush: ...

    def snapshot(self, now: float | None = None) -> Snapshot:
        """The picture now: a catch-up when the console opens an engine, and an action's decision (start or
        stop); the panels are drawn from the pictures the engine tells."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def probe_now(self) -> None: ...

    async def holder_now(self) -> LockInfo | None: ...

    async def flag_values(self) -> dict[str, str | None]: ...

    def editable_flags(self, values: Mapping[str, str | None]) -> list[FlagSpec]: ...


class DeploymentRow(Protocol):
    """One deployment as the overview shows it."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def gpus(self) -> tuple[int, ...]: ...

    @property
    def host_down(self) -> str: ...


class ConsoleFleet(Protocol):
    """Many deployments' engines, all running, whichever one the console shows."""

    @property
    def engines(self) -> Mapping[str, ConsoleEngine]: ...

    def recent_lines(self, deployment: str) -> LogsRead: ...

    def views(self, now: float) -> Sequence[DeploymentRow]: ...

    def start(self) -> None: ...

    async def close(self) -> None: ...
