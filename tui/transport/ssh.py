"""Commands on an SSH host through one persistent asyncssh connection per host.

- Honours ~/.ssh/config (aliases, User, Port, ProxyJump, IdentityFile), the agent and known_hosts. An unknown host
  key is refused with a message that names the known_hosts files and ssh_config in use and how to accept it; a
  *changed* one is refused as a possible man-in-the-middle. Checking is never turned off (`known_hosts_for`):
  bringup reads the known_hosts files itself, as `ssh` would, and hands asyncssh what they trust, never None
  (asyncssh takes `UserKnownHostsFile none` as "no checking" and would connect to anyone).
- Keepalive is short (every 3 s, dead after 9 s without a byte from the host), so a half-open link (a network
  blackhole, a hung host) is declared dead within ~10 s: `status` says so at once, open streams and commands end
  with a TransportError, and the next use reconnects with backoff ("reconnecting (attempt N)") so front ends show
  it instead of freezing. `last_seen` is when the host last sent anything (a command's output, a keepalive reply):
  a silent `journalctl -f` is normal; the keepalive, not channel silence, decides that the link is dead.
- Errors are `TransportError`s, `PermanentTransportError`s for those that retrying cannot fix (host key unknown or
  changed, authentication refused, a host name that does not resolve, a missing or bad key file).
- Commands are argv lists, joined with `shlex.quote` for the remote shell: no user text is ever interpreted.
- Long-running commands run under a pty, so closing the channel hangs them up on the host (sshd cannot signal a
  root session's command otherwise): no `journalctl -f` or `nvidia-smi -lms` is left behind.
- At most 8 channels at once per connection (OpenSSH's MaxSessions is 10 and frees slots late).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any

import asyncssh

from tui.errors import PermanentError
from tui.guard.files import FILE_MODE
from tui.guard.text import split_lines
from tui.transport import CommandResult, TransportError, remote_dir
from tui.transport.local import StreamLines
from tui.transport.ssh_errors import classify
from tui.transport.ssh_known_hosts import KnownHosts, known_hosts_checked, refused_host_key

__all__ = ["KEEPALIVE_COUNT_MAX", "KEEPALIVE_INTERVAL_S", "MAX_CHANNELS", "SFTP_CHUNK", "SshTransport",
           "remote_command"]

MAX_CHANNELS = 8
#: bytes per SFTP read or write request (well under OpenSSH's limits; servers may return less, and we loop)
SFTP_CHUNK = 32768
#: a keepalive request after this many seconds without a byte from the host ...
KEEPALIVE_INTERVAL_S = 3.0
#: ... and the link is declared dead when this many in a row go unanswered: after interval * (count + 1) = 9 s
KEEPALIVE_COUNT_MAX = 2


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """One shell-safe command line for the remote login shell."""
    parts = [shlex.quote(a) for a in argv]
    if env:
        parts = ["env", *(shlex.quote(f"{k}={v}") for k, v in env.items()), *parts]
    return " ".join(parts)


#: AES-GCM ahead of asyncssh's first choice, ChaCha20-Poly1305: as strong, and with AES in hardware (any x86 or ARM
#: server CPU of the last decade) about eight times cheaper per packet in asyncssh (52 against 6 us, measured), which
#: a console that keeps a link per host open all day pays on every packet. The rest of the default list follows
#: for a server that offers neither; an ssh_config that sets Ciphers is obeyed instead.
PREFERRED_CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"


class _Client(asyncssh.SSHClient):
    """One per connection attempt: notes every byte that arrives (`last_seen`) and when the connection goes."""

    def __init__(self, owner: SshTransport) -> None:
        self._owner = owner
        self.conn: asyncssh.SSHClientConnection | None = None
        self.peer_addr = ""

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn
        peer = conn.get_extra_info("peername")
        if peer:
            self.peer_addr = str(peer[0])
        owner, received = self._owner, conn.data_received

        def data_received(data: bytes, datatype: Any = None) -> None:
            owner.last_seen = time.monotonic()
            received(data, datatype)

        # the asyncio transport (or the tunnel's channel) calls its protocol's data_received for every read
        conn.data_received = data_received  # type: ignore[method-assign]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self._owner._connection_lost(self.conn, exc)


class SshTransport:
    """`status`: "not connected", "connecting", "connected", "disconnected: WHY" (the link was lost; the next use
    reconnects), "reconnecting (attempt N)[: WHY]", "failed: WHY" (a permanent error: see `last_error`), "closed".
    `connected`: whether the link is up now. `last_seen`: `time.monotonic()` of the last byte received from the
    host (0.0 before any); on a live link it is never older than about `keepalive_s`, because idle links are
    probed. `dead_after_s`: how long the host may stay silent before the link is declared dead.
    `last_error`: the TransportError that ended the last connection or connection attempt (None after a connect)."""

    def __init__(self, destination: str, *, config: Sequence[str] = (), keepalive_s: float = KEEPALIVE_INTERVAL_S,
                 keepalive_count_max: int = KEEPALIVE_COUNT_MAX, connect_timeout: float = 10.0) -> None:
        self.destination = destination
        self.name = destination
        self.config = [os.path.expanduser(c) for c in config]
        self.keepalive_s = keepalive_s
        self.keepalive_count_max = keepalive_count_max
        self.connect_timeout = connect_timeout
        self.status = "not connected"
        self.attempt = 0
        self.connections = 0  # successful connects; more than one means we reconnected
        self.last_seen = 0.0
        self.last_error: TransportError | None = None
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        #: directories `write_file` has made or checked on the host (remote_dir.py): once a directory of ours no
        #: one else can write, it stays so
        self._dirs_checked: set[str] = set()
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(MAX_CHANNELS)
        self._closed = False
        self._next_try = 0.0
        self._attempts_failed = 0
        self._forwards: dict[tuple[str, int], tuple[int, Any]] = {}

    def _ciphers_configured(self) -> bool:
        """Whether an ssh_config in use chooses the ciphers itself: then its choice is the one used, not ours."""
        for path in self.config or [os.path.expanduser("~/.ssh/config")]:
            try:
                text = Path(path).read_text(errors="replace")
            except OSError:
                continue
            if any(line.strip().lower().startswith("ciphers") for line in split_lines(text)):
                return True
        return False

    @property
    def dead_after_s(self) -> float:
        return self.keepalive_s * (self.keepalive_count_max + 1)

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    # ------------------------------------------------------------------ connection

    async def connection(self) -> asyncssh.SSHClientConnection:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        tried = self._attempts_failed
        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            if self._closed:
                raise TransportError(f"{self.destination}: transport closed")
            if self._attempts_failed != tried and self.last_error is not None:
                # the attempt this caller waited on failed: that is its answer now, not another attempt after
                # the backoff (every collector queued behind the lock would learn the host is down one backoff later)
                raise self.last_error
            wait = self._next_try - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.attempt += 1
            again = self.connections > 0 or self.attempt > 1
            self.status = f"reconnecting (attempt {self.attempt})" if again else "connecting"
            client = _Client(self)
            kwargs: dict[str, Any] = {"keepalive_interval": self.keepalive_s,
                                      "keepalive_count_max": self.keepalive_count_max,
                                      "client_factory": lambda: client}
            if self.config:
                kwargs["config"] = self.config
            if not self._ciphers_configured():
                kwargs["encryption_algs"] = PREFERRED_CIPHERS
            kh: KnownHosts | None = None
            try:
                async with asyncio.timeout(self.connect_timeout):
                    # the known_hosts are read here, never left to asyncssh: it takes `UserKnownHostsFile none`
                    # for "no checking". Read again at every connect: a key accepted meanwhile counts.
                    kh = await asyncio.to_thread(known_hosts_checked, self.destination, self.config)
                    conn = await asyncssh.connect(self.destination, known_hosts=kh.trusted, **kwargs)
            except (OSError, asyncssh.Error, TimeoutError, ValueError, TransportError) as e:
                if isinstance(e, asyncssh.HostKeyNotVerifiable) and kh is not None:
                    err = await refused_host_key(self.destination, self.config, e, kh=kh, addr=client.peer_addr)
                else:
                    err = classify(self.destination, e, self.config, self.dead_after_s)
                backoff = min(30.0, 0.5 * 2 ** min(self.attempt, 6))
                self._next_try = time.monotonic() + backoff
                self.last_error = err
                self._attempts_failed += 1
                self.status = (f"failed: {err}" if isinstance(err, PermanentError)
                               else f"reconnecting (attempt {self.attempt}): {err}")
                raise err from None
            self._conn, self._sftp = conn, None
            self.attempt, self._next_try = 0, 0.0
            self.connections += 1
            self.last_seen = time.monotonic()
            self.last_error = None
            self.status = "connected"
            await self._restore_forwards(conn)
            return conn

    def _connection_lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> None:
        """asyncssh's callback, the moment a connection goes (keepalive unanswered, reset, closed by us)."""
        if conn is not self._conn:
            return
        self._conn, self._sftp = None, None
        if self._closed:
            self.status = "closed"
            return
        self.last_error = (classify(self.destination, exc, self.config, self.dead_after_s) if exc is not None
                           else TransportError(f"{self.destination}: SSH connection closed", kind="lost"))
        self.status = f"disconnected: {self.last_error}"

    def _failed(self, conn: asyncssh.SSHClientConnection, e: BaseException) -> TransportError:
        """The error for a command or stream that failed with `e`; drops the connection only if it is the current
        one and the failure was the connection's (not a refused channel on a healthy connection)."""
        if self._closed:
            return TransportError(f"{self.destination}: transport closed", kind="closed")
        if isinstance(e, asyncssh.SFTPConnectionLost) and conn is self._conn:
            self._sftp = None  # the SFTP channel is gone; a later call starts another
        err = classify(self.destination, e, self.config, self.dead_after_s)
        if conn.is_closed() or isinstance(e, (asyncssh.DisconnectError, OSError)):
            if conn is self._conn:
                self._conn, self._sftp = None, None
                self.last_error, self.status = err, f"disconnected: {err}"
                conn.close()
            elif (isinstance(e, (asyncssh.ChannelOpenError, asyncssh.SFTPConnectionLost))
                  and self.last_error is not None):
                return self.last_error  # "SSH connection closed": say why it closed
        return err

    def _lost_error(self) -> TransportError:
        return self.last_error or TransportError(f"{self.destination}: SSH connection lost", kind="lost")

    async def _sftp_client(self) -> tuple[asyncssh.SSHClientConnection, asyncssh.SFTPClient]:
        conn = await self.connection()
        if self._sftp is None:
            try:
                sftp = await conn.start_sftp_client()
            except (asyncssh.Error, OSError) as e:
                raise self._failed(conn, e) from None
            if conn is self._conn:
                self._sftp = sftp
            return conn, sftp
        return conn, self._sftp

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
                raise TransportError(f"{self.destination}: {argv[0]!r} did not finish within {timeout:g} s",
                                     kind="timeout") from None
            except (asyncssh.Error, OSError) as e:
                raise self._failed(conn, e) from None
        if res.exit_status is None and not res.exit_signal and conn.is_closed():
            raise self._lost_error()  # the channel ended with the connection, not with the command
        rc = res.exit_status if res.exit_status is not None else (128 + 9 if res.exit_signal else -1)
        out = res.stdout if isinstance(res.stdout, bytes) else (res.stdout or "").encode()
        err = res.stderr if isinstance(res.stderr, bytes) else (res.stderr or "").encode()
        if rc == 124 and argv[0] != "timeout":
            raise TransportError(f"{self.destination}: {argv[0]!r} did not finish within {timeout:g} s",
                                 kind="timeout")
        return CommandResult(rc, out, err)

    async def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncGenerator[str, None]:
        conn = await self.connection()
        async with self._slots:
            try:
                proc = await conn.create_process(remote_command(argv, env), term_type="dumb",
                                                 term_size=(4096, 24), encoding=None)
            except (asyncssh.Error, OSError) as e:
                raise self._failed(conn, e) from None
            splitter = StreamLines()  # a journal record of up to 4 MiB arrives whole
            try:
                while True:
                    try:
                        data = await proc.stdout.read(65536)
                    except (asyncssh.Error, OSError) as e:
                        raise self._failed(conn, e) from None
                    if not data:
                        for line in splitter.flush():
                            yield line
                        break
                    for line in splitter.feed(data if isinstance(data, bytes) else data.encode()):
                        yield line
                if conn.is_closed():
                    raise self._lost_error()
            finally:
                with contextlib.suppress(Exception):
                    proc.close()  # with a pty, sshd hangs the command up

    async def read_file(self, path: str) -> bytes | None:
        conn, sftp = await self._sftp_client()
        try:
            # read by chunks until EOF: /proc and /sys files report a size of 0, and read() trusts the size.
            # block_size=0: one request at a time, awaited here. asyncssh's parallel reads run in tasks of their own
            # that a cancelled read leaves behind, to fail with "Task exception was never retrieved" once the
            # connection goes.
            parts: list[bytes] = []
            async with sftp.open(path, "rb", block_size=0) as f:
                while True:
                    chunk = await f.read(SFTP_CHUNK)
                    if not chunk:
                        break
                    parts.append(chunk if isinstance(chunk, bytes) else chunk.encode())
            return b"".join(parts)
        except asyncssh.SFTPNoSuchFile:
            return None
        except asyncssh.SFTPConnectionLost as e:
            raise self._failed(conn, e) from None
        except asyncssh.SFTPError as e:
            # sftp-server answers a bare "Failure" for ESRCH: a /proc/PID file whose process exited between the
            # open and the read. A file that is no longer there reads as gone, as it would have a moment later
            if not await self._exists(sftp, path):
                return None
            raise TransportError(f"{self.destination}: cannot read {path}: {e.reason}") from None
        except (asyncssh.Error, OSError) as e:
            raise self._failed(conn, e) from None

    async def read_files(self, paths: Sequence[str]) -> list[bytes | None]:
        # one after another on the one SFTP channel: in order, as the interface says, at a round trip each
        return [await self.read_file(p) for p in paths]

    @staticmethod
    async def _exists(sftp: asyncssh.SFTPClient, path: str) -> bool:
        """Whether `path` is there, true when that cannot be told (the read's own error is then the one shown)."""
        try:
            await sftp.stat(path)
        except asyncssh.SFTPNoSuchFile:
            return False
        except (asyncssh.Error, OSError):
            return True
        return True

    async def write_file(self, path: str, data: bytes, *, mode: int = FILE_MODE) -> None:
        """Atomically: a fresh name, created exclusively (FXF_EXCL, the server's O_EXCL) with `mode` given at the
        open (SFTP attrs: no moment where the host's umask or a chmod after leaves it readable), renamed over `path`;
        a link or file another user of the host planted at a name they could guess is never written through. Its
        directory is made or checked first by the one guarded helper (`remote_dir.py`: no link followed, none that
        another user can write); SFTP's `makedirs` would follow a planted link."""
        parent = os.path.dirname(path)
        if parent and parent not in self._dirs_checked:
            await remote_dir.private_dir(self, parent, root_ok=True, tighten=False)
            self._dirs_checked.add(parent)
        tmp = f"{path}.bringup-{secrets.token_hex(6)}.tmp"
        conn, sftp = await self._sftp_client()
        try:
            step = max(1024, min(SFTP_CHUNK, sftp.limits.max_write_len or SFTP_CHUNK))
            attrs = asyncssh.SFTPAttrs(permissions=mode)
            async with sftp.open(tmp, "xb", attrs, block_size=0) as f:  # no parallel-I/O tasks: see read_file
                for at in range(0, len(data), step):
                    await f.write(data[at:at + step])
            await sftp.posix_rename(tmp, path)
        except asyncssh.SFTPConnectionLost as e:
            raise self._failed(conn, e) from None
        except asyncssh.SFTPError as e:
            with contextlib.suppress(asyncssh.Error, OSError):
                await sftp.remove(tmp)
            raise TransportError(f"{self.destination}: cannot write {path}: {e.reason}") from None
        except (asyncssh.Error, OSError) as e:
            raise self._failed(conn, e) from None

    async def forward(self, host: str, port: int) -> int:
        """A local port that reaches host:port as seen from the SSH host (its loopback, typically)."""
        key = (host, port)
        if key in self._forwards:
            return self._forwards[key][0]
        conn = await self.connection()
        try:
            listener = await conn.forward_local_port("127.0.0.1", 0, host, port)
        except (asyncssh.Error, OSError) as e:
            raise self._failed(conn, e) from None
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
        conn, self._conn, self._sftp = self._conn, None, None
        self.status = "closed"
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await conn.wait_closed()
