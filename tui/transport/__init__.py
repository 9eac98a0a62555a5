"""Transports run commands where a deployment lives: this machine (`local`) or an SSH host.

Everything above this layer speaks argv lists, never shell strings, so user text cannot become a command.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


class TransportError(Exception):
    """A command could not be run or did not finish; the message is shown to the user as is.

    `permanent`: waiting and retrying will not fix it (an unknown or changed host key, authentication refused, a
    host name that does not resolve, a missing or unreadable key file): `bringup wait` and other retry loops should
    stop at once and show the message. Transient errors (refused, timed out, reset, link dead, the host rebooting)
    are worth retrying. `kind` is a short machine-readable name ("host-key-changed", "host-key-unknown", "auth",
    "unknown-host", "config", "refused", "timeout", "lost", ...; "" when unclassified).
    """

    def __init__(self, message: str = "", *, permanent: bool = False, kind: str = "") -> None:
        super().__init__(message)
        self.permanent = permanent
        self.kind = kind


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

    Two members only a link has are left out so that `LocalTransport` need not fake them: `status` (a line on the
    link's health, shown as a note while it is not "connected") and `forward(host, port)` (a local port that
    reaches a port on the host's loopback). `SshTransport` has both; callers look them up with `getattr`.
    """

    name: str

    async def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: bytes | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult: ...

    def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
        """Lines of a long-running command's stdout (split on \\n and \\r); closing the iterator kills it."""
        ...

    async def read_file(self, path: str) -> bytes | None: ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Write atomically (temp file + rename), creating parent directories."""
        ...

    async def close(self) -> None: ...
