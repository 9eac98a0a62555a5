"""Classifying a failure to reach or keep an SSH host into one `TransportError` an operator can act on.

Kept apart from the connection so that every path that can fail (connecting, a command, a stream, SFTP, the
connection-lost callback) names the same fault in the same words, and so that the permanent split, which stops
`bringup wait` and other retry loops at once, lives in one table that can be tested without a host.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Sequence

import asyncssh

from tui.transport import PermanentTransportError, TransportError

#: getaddrinfo's answers for a name that does not exist (as opposed to a resolver that cannot be reached now)
_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def config_desc(config: Sequence[str]) -> str:
    """The ssh_config files asyncssh reads for this host, as the user would name them."""
    if config:
        return ", ".join(config)
    return "~/.ssh/config" if os.access(os.path.expanduser("~/.ssh/config"), os.R_OK) else "~/.ssh/config (none)"


def classify(dest: str, e: BaseException, config: Sequence[str] = (), dead_after_s: float | None = None
             ) -> TransportError:
    """The TransportError for a failure to reach or keep `dest`: one line that says what is wrong and what to do,
    a `PermanentTransportError` where retrying cannot help. `config`: the host's ssh_config files, which replace
    ~/.ssh/config (so that is where a Host block, its HostName, Port and IdentityFile must be)."""
    where = ", ".join(config) if config else "~/.ssh/config"
    if isinstance(e, TransportError):
        return e
    if isinstance(e, asyncssh.HostKeyNotVerifiable):  # SshTransport replaces it: refused_host_key
        return PermanentTransportError(f"{dest}: SSH host key not trusted ({e.reason}); refusing to connect. "
                                       "Known hosts are read from the UserKnownHostsFile in "
                                       f"{config_desc(config)}", kind="host-key-unknown")
    if isinstance(e, asyncssh.PermissionDenied):
        return PermanentTransportError(f"{dest}: SSH permission denied (is your key in the agent, or IdentityFile "
                                       f"set in {where}?)", kind="auth")
    if isinstance(e, socket.gaierror):
        if e.errno in _NO_SUCH_NAME:
            return PermanentTransportError(f"{dest}: unknown host (not in DNS, and no `Host {dest}` with a "
                                           f"HostName in {where})", kind="unknown-host")
        return TransportError(f"{dest}: cannot resolve the host name now ({e.strerror})", kind="dns")
    if isinstance(e, ConnectionRefusedError):
        return TransportError(f"{dest}: SSH connection refused (is sshd running? a port other than 22 goes in "
                              f"`Host {dest}` as `Port N` in {where})", kind="refused")
    if isinstance(e, TimeoutError):
        return TransportError(f"{dest}: SSH connection timed out", kind="timeout")
    if isinstance(e, FileNotFoundError):
        return PermanentTransportError(f"{dest}: {e.strerror}: {e.filename} (an IdentityFile in {where}?)",
                                       kind="config")
    if isinstance(e, PermissionError) and e.filename:
        return PermanentTransportError(f"{dest}: {e.strerror}: {e.filename} (a key or known_hosts file named in "
                                       f"{where}?)", kind="config")
    if isinstance(e, asyncssh.ConnectionLost) and "keepalive" in e.reason and dead_after_s:
        return TransportError(f"{dest}: SSH link dead: no reply from the host for {dead_after_s:g} s "
                              "(network down, or the host hung)", kind="lost")
    if isinstance(e, asyncssh.DisconnectError):
        why = "closed by the host or the network" if e.reason == "Connection lost" else e.reason
        return TransportError(f"{dest}: SSH connection lost ({why})", kind="lost")
    if isinstance(e, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return TransportError(f"{dest}: SSH connection reset ({e.strerror})", kind="lost")
    if isinstance(e, asyncssh.ChannelOpenError):
        return TransportError(f"{dest}: SSH channel refused ({e.reason})", kind="channel")
    if isinstance(e, asyncssh.SFTPConnectionLost):
        return TransportError(f"{dest}: SFTP session lost ({e.reason})", kind="lost")
    if isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
        return TransportError(f"{dest}: host unreachable ({e.strerror})", kind="unreachable")
    if isinstance(e, ValueError):  # asyncssh: a key that cannot be read (KeyImportError), a bad config line
        return PermanentTransportError(f"{dest}: SSH key or config problem: {e} (see {where})",
                                       kind="config")
    return TransportError(f"{dest}: SSH error: {type(e).__name__}: {e}")


def explain(dest: str, e: BaseException, config: Sequence[str] = ()) -> str:
    """One line that says what is wrong and what to do (the text of `classify`)."""
    return str(classify(dest, e, config))
