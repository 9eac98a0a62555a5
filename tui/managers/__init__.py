"""Service managers: how a deployment's server is started, stopped, observed and configured.

`systemd` (a unit on a host), `process` (a command bringup supervises itself; the demo and hosts without
systemd), `docker`, `compose`, `slurm` (a batch job on a cluster, from its login host) and `none` (observe only),
each built from its config variant through registry.py. The engine and the restart protocol only see this
interface, and what a manager can do beyond it is declared (`can_control`, `sees_run`, `LogHistory`, `Placed` in
placement.py: a run a scheduler places), never looked up by name.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol, runtime_checkable

from tui.errors import PermanentError as Permanent
from tui.model import LockInfo, LogLine, UnitState


class ManagerError(Exception):
    """An action the manager could not perform; the message is shown to the user as is."""


class LockHeld(ManagerError):
    """Another bringup holds the deployment's restart lock."""

    def __init__(self, message: str, holder: LockInfo | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class PermanentManagerError(ManagerError, Permanent):
    """Waiting will not fix it (the unit does not exist, sudo is refused): a command says so and exits at once."""


def refusal(holder: LockInfo | None) -> LockHeld:
    """The refusal a lock gives when another bringup holds it, naming that holder where its record says who."""
    if holder is None:
        return LockHeld("another bringup is already restarting this deployment (it left no record of who)")
    return LockHeld(f"another bringup is already restarting this deployment: {holder.describe()}", holder)


class Report(Protocol):
    """How a manager tells the step it is in what it does meanwhile (a node stopped, an image pulled, what a
    recreate cannot carry over): a restart shows each as a line of its step. Passed to the call it belongs to,
    so that what is told always reaches the one who asked."""

    def __call__(self, step: str, detail: str) -> None: ...


def unreported(step: str, detail: str) -> None:
    """No one is listening (the engine's own calls, a test)."""


class Manager(Protocol):
    kind: str
    #: what the confirmation dialog and messages call the thing being restarted
    target: str
    #: whether bringup starts, stops and changes the flags of this server (false: observe only)
    can_control: bool
    #: whether `state()` says if the server runs and `follow()` gives its log (false: only probes tell, and the
    #: lifecycle is read from them alone)
    sees_run: bool

    async def state(self) -> UnitState: ...

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None: ...

    async def stop(self, report: Report = unreported) -> None: ...

    def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        """Log lines of the given invocation from its first line on, then live; ends when that run has ended."""
        ...

    async def read_argv(self) -> list[str]:
        """The server command line the next start will use."""
        ...

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None: ...

    async def read_saved_argv(self, which: str) -> list[str] | None:
        """`previous` (before the last write) or `ready` (the last argv that reached ready)."""
        ...

    async def save_argv(self, which: str, argv: Sequence[str]) -> None: ...

    def lock(self, purpose: str, change: str = "") -> AsyncLock: ...

    async def pids(self, unit: UnitState) -> set[int] | None:
        """Every process of the current run (the server and its children), or None if it cannot be known."""
        ...


@runtime_checkable
class LogHistory(Protocol):
    """A manager that keeps each run's log after it ended: an ended run's log tells how it ended (a crash's
    traceback) and the console says where the whole of it is. An observe-only manager has none."""

    def log_source(self, invocation: str) -> str:
        """Where the run's whole log is, for the user to read (a journalctl command, a file)."""
        ...

    async def read_log(self, invocation: str) -> list[LogLine]:
        """The run's log so far, bounded (its head and its end when long)."""
        ...


class AsyncLock(Protocol):
    """The deployment's lock: one restart, start or stop at a time, held from its first step to its last.

    Its record (who, why, since when, the latest step) is the same for every kind of lock (lock_record.py, which
    also says whether a holder is this process): file_lock.py on this host, remote_lock.py on another."""

    async def __aenter__(self) -> LockInfo: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def still_held(self) -> bool:
        """Whether the lock taken is still ours, checked on the host (a dropped SSH connection frees a remote
        one); raises TransportError when the host cannot be asked."""
        ...

    async def retake(self) -> LockInfo:
        """Take the lock again after it was lost (raises LockHeld if someone else has it now)."""
        ...

    async def holder(self) -> LockInfo | None:
        """The live holder's record, without taking the lock; None when no one holds it."""
        ...

    async def note(self, step: str) -> None:
        """Write the holder's latest step into its record, for other consoles to show."""
        ...
