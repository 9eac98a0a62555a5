"""Transports run commands where a deployment lives: this machine (`local`) or an SSH host.

Everything above this layer speaks argv lists, never shell strings, so user text cannot become a command.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tui.errors import PermanentError


def quiet_asyncssh_deprecations() -> None:
    """asyncssh names cryptography's DSA types at import, and cryptography 51 warns that DSA is deprecated: ten
    lines of warnings on stderr before every command that imports the SSH transport, on every terminal and in every
    script that reads bringup's one-line errors. They are about asyncssh's code, not anything the user does. Set
    when this package is imported, which every asyncssh import goes through first; a warning of our own still
    shows, and so does any other asyncssh warning."""
    warnings.filterwarnings("ignore", message=r"\w+ is deprecated and support will be removed", module=r"asyncssh\.")


quiet_asyncssh_deprecations()


class TransportError(Exception):
    """A command could not be run or did not finish; the message is shown to the user as is.

    Transient errors (refused, timed out, reset, link dead, the host rebooting) are worth retrying; those that
    are not are `PermanentTransportError`s. `kind` is a short machine-readable name ("host-key-changed",
    "host-key-unknown", "auth", "unknown-host", "config", "refused", "timeout", "lost", ...; "" when unclassified).
    """

    def __init__(self, message: str = "", *, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


class PermanentTransportError(TransportError, PermanentError):
    """Waiting and retrying will not fix it (an unknown or changed host key, authentication refused, a host name
    that does not resolve, a missing or unreadable key file): `bringup wait` and other retry loops stop at once and
    show the message."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    rc: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


class Transport(Protocol):
    """What every layer above needs from a host: argv commands, line streams, whole-file reads and atomic writes.

    What only a link has is declared apart (`Link`, `Forwarding`), so that `LocalTransport` need not fake it;
    callers ask `isinstance(transport, Link)`.
    """

    name: str

    async def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: bytes | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult: ...

    def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncGenerator[str, None]:
        """Lines of a long-running command's stdout (split on \\n and \\r); closing the iterator kills it."""
        ...

    async def read_file(self, path: str) -> bytes | None:
        """The file's bytes; None when it is not there, or went while it was read (a /proc/PID file of a process that
        exited in that moment)."""
        ...

    async def read_files(self, paths: Sequence[str]) -> list[bytes | None]:
        """Each file's bytes (None as `read_file` says), read in this order, one after another, in one go where the
        transport can: a unit's state is three small files a second, and each read of its own is a wake-up of the
        loop and of a thread."""
        ...

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        """Write atomically (a fresh O_EXCL temp file + rename, no link followed), creating parent directories
        (0700) through the guarded place of the host (`guard/files.py` here, `remote_dir.py` on another host). The
        file is created `mode`, given to the call that creates it: 0600 by default, for what bringup writes holds
        command lines and their secrets; a caller that needs another program to read it names the mode and why."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class Link(Protocol):
    """A transport over a connection that can drop (SSH), whose health the console and the fleet show."""

    #: "connected", "reconnecting (attempt N)[: WHY]", "failed: WHY", ...: shown as a note while not "connected"
    status: str


@runtime_checkable
class Forwarding(Protocol):
    """A transport that can reach a port on its host's loopback from here (an SSH port forward)."""

    async def forward(self, host: str, port: int) -> int:
        """A local port that reaches `host:port` as seen from the transport's host."""
        ...


def link_status(transport: Transport) -> str:
    """The link's health in words; a transport that is no link (this machine) is always "connected"."""
    return transport.status if isinstance(transport, Link) else "connected"


async def process_alive(transport: Transport, pid: int) -> bool:
    """A process on the transport's host, alive and not a zombie (a pid of that host's, read in its /proc)."""
    if pid <= 0:
        return False
    return stat_alive(await transport.read_file(f"/proc/{pid}/stat"))


def stat_alive(stat: bytes | None) -> bool:
    """Whether a /proc/PID/stat read says its process is alive (None: the file is not there, no process)."""
    # field 3 (after the parenthesised command name) is the state; Z = zombie, X = dead
    return stat is not None and stat.rsplit(b")", 1)[-1].split()[0:1] not in ([b"Z"], [b"X"])
