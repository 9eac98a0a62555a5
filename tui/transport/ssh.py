"""Commands on an SSH host through one persistent asyncssh connection per host.

- Honours ~/.ssh/config (aliases, User, Port, ProxyJump, IdentityFile), the agent and known_hosts. An unknown host
  key is refused with a message that says how to accept it; checking is never turned off.
- Keepalive is on; a lost connection is re-opened with backoff on the next use, and `status` says
  "reconnecting (attempt N)" meanwhile so front ends show it instead of freezing.
- Commands are argv lists, joined with `shlex.quote` for the remote shell: no user text is ever interpreted.
- Long-running commands run under a pty, so closing the channel hangs them up on the host (sshd cannot signal a
  root session's command otherwise): no `journalctl -f` or `nvidia-smi -lms` is left behind.
- At most 8 channels at once per connection (OpenSSH's MaxSessions is 10 and frees slots late).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import asyncssh

from tui.transport import CommandResult, TransportError
from tui.transport.lines import LineSplitter

MAX_CHANNELS = 8


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """One shell-safe command line for the remote login shell."""
    parts = [shlex.quote(a) for a in argv]
    if env:
        parts = ["env", *(shlex.quote(f"{k}={v}") for k, v in env.items()), *parts]
    return " ".join(parts)


def explain(dest: str, e: BaseException, config: Sequence[str] = ()) -> str:
    """One line that says what is wrong and what to do. `config`: the host's ssh_config files, which replace
    ~/.ssh/config (so that is where a Host block, its HostName, Port and IdentityFile must be)."""
    where = ", ".join(config) if config else "~/.ssh/config"
    if isinstance(e, asyncssh.HostKeyNotVerifiable):
        return (f"{dest}: unknown SSH host key; refusing to connect. Check it and accept it once with "
                f"`ssh {dest}` (or add `ssh-keyscan` output to ~/.ssh/known_hosts)")
    if isinstance(e, asyncssh.PermissionDenied):
        return f"{dest}: SSH permission denied (is your key in the agent, or IdentityFile set in {where}?)"
    if isinstance(e, socket.gaierror):
        return f"{dest}: unknown host (not in DNS, and no `Host {dest}` with a HostName in {where})"
    if isinstance(e, ConnectionRefusedError):
        return (f"{dest}: SSH connection refused (is sshd running? a port other than 22 goes in `Host {dest}` "
                f"as `Port N` in {where})")
    if isinstance(e, (TimeoutError, asyncio.TimeoutError)):
        return f"{dest}: SSH connection timed out"
    if isinstance(e, FileNotFoundError):
        return f"{dest}: {e.strerror}: {e.filename} (an IdentityFile in {where}?)"
    if isinstance(e, asyncssh.ConnectionLost):
        return f"{dest}: SSH connection lost ({e.reason})"
    return f"{dest}: SSH error: {type(e).__name__}: {e}"


class SshTransport:
    def __init__(self, destination: str, *, config: Sequence[str] = (), keepalive_s: float = 10.0,
                 connect_timeout: float = 15.0) -> None:
        self.destination = destination
        self.name = destination
        self.config = [os.path.expanduser(c) for c in config]
        self.keepalive_s = keepalive_s
        self.connect_timeout = connect_timeout
        self.status = "not connected"
        self.attempt = 0
        self.connections = 0  # successful connects; more than one means we reconnected
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(MAX_CHANNELS)
        self._closed = False
        self._next_try = 0.0
        self._forwards: dict[tuple[str, int], tuple[int, Any]] = {}

    # ------------------------------------------------------------------ connection

    async def connection(self) -> asyncssh.SSHClientConnection:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            if self._closed:
                raise TransportError(f"{self.destination}: transport closed")
            wait = self._next_try - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.attempt += 1
            self.status = "connecting" if self.attempt == 1 else f"reconnecting (attempt {self.attempt})"
            kwargs: dict[str, Any] = {"keepalive_interval": self.keepalive_s, "keepalive_count_max": 3}
            if self.config:
                kwargs["config"] = self.config
            try:
                async with asyncio.timeout(self.connect_timeout):
                    conn = await asyncssh.connect(self.destination, **kwargs)
            except (OSError, asyncssh.Error, TimeoutError) as e:
                backoff = min(30.0, 0.5 * 2 ** min(self.attempt, 6))
                self._next_try = time.monotonic() + backoff
                self.status = f"reconnecting (attempt {self.attempt}): {explain(self.destination, e, self.config)}"
                raise TransportError(explain(self.destination, e, self.config)) from None
            self._conn, self._sftp = conn, None
            self.attempt, self._next_try = 0, 0.0
            self.connections += 1
            self.status = "connected"
            await self._restore_forwards(conn)
            return conn

    def _lost(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn, self._sftp = None, None
        self.status = "reconnecting (attempt 1)"

    async def _sftp_client(self) -> asyncssh.SFTPClient:
        conn = await self.connection()
        if self._sftp is None:
            self._sftp = await conn.start_sftp_client()
        return self._sftp

    # ------------------------------------------------------------------ Transport interface

    async def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: bytes | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        # `timeout` on the host too: asyncssh's own timeout leaves the remote command running
        cmd = remote_command(["timeout", "-k", "2", f"{max(1, int(timeout))}", *argv], env)
        conn = await self.connection()
        async with self._slots:
            try:
                async with asyncio.timeout(timeout + 5):
                    res = await conn.run(cmd, input=input, encoding=None, check=False)
            except TimeoutError:
                raise TransportError(f"{self.destination}: {argv[0]!r} did not finish within {timeout:g} s") from None
            except (asyncssh.Error, OSError) as e:
                self._lost()
                raise TransportError(explain(self.destination, e, self.config)) from None
        rc = res.exit_status if res.exit_status is not None else (128 + 9 if res.exit_signal else -1)
        out = res.stdout if isinstance(res.stdout, bytes) else (res.stdout or "").encode()
        err = res.stderr if isinstance(res.stderr, bytes) else (res.stderr or "").encode()
        if rc == 124 and argv[0] != "timeout":
            raise TransportError(f"{self.destination}: {argv[0]!r} did not finish within {timeout:g} s")
        return CommandResult(rc, out, err)

    async def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
        conn = await self.connection()
        async with self._slots:
            try:
                proc = await conn.create_process(remote_command(argv, env), term_type="dumb",
                                                 term_size=(4096, 24), encoding=None)
            except (asyncssh.Error, OSError) as e:
                self._lost()
                raise TransportError(explain(self.destination, e, self.config)) from None
            splitter = LineSplitter()
            try:
                while True:
                    try:
                        data = await proc.stdout.read(65536)
                    except (asyncssh.Error, OSError) as e:
                        self._lost()
                        raise TransportError(explain(self.destination, e, self.config)) from None
                    if not data:
                        for line in splitter.flush():
                            yield line
                        break
                    for line in splitter.feed(data if isinstance(data, bytes) else data.encode()):
                        yield line
                if conn.is_closed():
                    self._lost()
                    raise TransportError(f"{self.destination}: SSH connection lost")
            finally:
                with contextlib.suppress(Exception):
                    proc.close()  # with a pty, sshd hangs the command up

    async def read_file(self, path: str) -> bytes | None:
        try:
            sftp = await self._sftp_client()
            # read by chunks until EOF: /proc and /sys files report a size of 0, and read() trusts the size
            parts: list[bytes] = []
            async with sftp.open(path, "rb") as f:
                while True:
                    chunk = await f.read(65536)
                    if not chunk:
                        break
                    parts.append(chunk if isinstance(chunk, bytes) else chunk.encode())
            return b"".join(parts)
        except asyncssh.SFTPNoSuchFile:
            return None
        except asyncssh.SFTPError as e:
            raise TransportError(f"{self.destination}: cannot read {path}: {e.reason}") from None
        except (asyncssh.Error, OSError) as e:
            self._lost()
            raise TransportError(explain(self.destination, e, self.config)) from None

    async def write_file(self, path: str, data: bytes) -> None:
        tmp = f"{path}.bringup-{os.getpid()}.tmp"
        try:
            sftp = await self._sftp_client()
            parent = os.path.dirname(path)
            if parent:
                await sftp.makedirs(parent, exist_ok=True)
            async with sftp.open(tmp, "wb") as f:
                await f.write(data)
            await sftp.posix_rename(tmp, path)
        except asyncssh.SFTPError as e:
            raise TransportError(f"{self.destination}: cannot write {path}: {e.reason}") from None
        except (asyncssh.Error, OSError) as e:
            self._lost()
            raise TransportError(explain(self.destination, e, self.config)) from None

    async def forward(self, host: str, port: int) -> int:
        """A local port that reaches host:port as seen from the SSH host (its loopback, typically)."""
        key = (host, port)
        if key in self._forwards:
            return self._forwards[key][0]
        conn = await self.connection()
        listener = await conn.forward_local_port("127.0.0.1", 0, host, port)
        local = listener.get_port()
        self._forwards[key] = (local, listener)
        return local

    async def _restore_forwards(self, conn: asyncssh.SSHClientConnection) -> None:
        """After a reconnect, listen again on the same local ports so that clients keep their URLs."""
        for (host, port), (local, old) in list(self._forwards.items()):
            with contextlib.suppress(Exception):
                old.close()
            try:
                listener = await conn.forward_local_port("127.0.0.1", local, host, port)
                self._forwards[(host, port)] = (local, listener)
            except (OSError, asyncssh.Error):
                self._forwards.pop((host, port), None)

    async def close(self) -> None:
        self._closed = True
        for _, listener in self._forwards.values():
            with contextlib.suppress(Exception):
                listener.close()
        self._forwards.clear()
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
        self._conn = None
