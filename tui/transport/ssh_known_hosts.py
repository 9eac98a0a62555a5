"""The known_hosts an SSH host's key is checked against, read by bringup itself as `ssh` reads them, and why a key
was refused.

Why bringup reads them and does not leave it to asyncssh: asyncssh takes `UserKnownHostsFile none` (and None) as
"no checking" and would connect to anyone. Here no file read means no key trusted, StrictHostKeyChecking never
accepts a key, and a ProxyJump host that would be connected unchecked is refused (`known_hosts_checked`).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import shlex
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from tui.guard.numbers import whole_or_none
from tui.transport import PermanentTransportError, TransportError
from tui.transport.ssh_errors import classify, config_desc
from tui.transport.ssh_keys import OPENSSH_HOST_KEY_ORDER, known_host_entries, offered_key

#: the files OpenSSH reads when the ssh_config names none (ssh_config(5), UserKnownHostsFile, GlobalKnownHostsFile)
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
#: a `%x` token or a `${VAR}` in a known_hosts path (ssh_config(5), TOKENS and ENVIRONMENT VARIABLES)
_PATH_TOKEN = re.compile(r"%(.)|\$\{([^}]*)\}")
#: a TCP port
PORT_MAX = 65535


@dataclass(frozen=True)
class KnownHosts:
    """The known_hosts a host's key is checked against, as bringup read them itself (`known_hosts_for`).

    `read`: the files whose entries are trusted (they exist and could be read; /dev/null is never one).
    `unread`: the files named that give nothing, and why ("X does not exist", "Y cannot be read: ...", "Z cannot be
    expanded"). `off`: the settings that name no file ("UserKnownHostsFile none", "GlobalKnownHostsFile /dev/null").
    `record_in`: where `ssh` records a key it is told to accept (the first file of UserKnownHostsFile; "" when it
    names none). `trusted`: every entry of the files read, the object asyncssh checks the host's key against:
    never None (which asyncssh takes as "accept any key") and never empty-falsy (which it takes as "read
    ~/.ssh/known_hosts" whatever the config says); no file read means no key is trusted."""

    read: tuple[str, ...]
    unread: tuple[str, ...]
    off: tuple[str, ...]
    record_in: str
    trusted: asyncssh.SSHKnownHosts


def _expand_path(path: str, tokens: Mapping[str, str]) -> str | None:
    """A known_hosts path with its `~`, `%` tokens and `${VAR}`s expanded as OpenSSH does; None when it names a
    token or variable that cannot be expanded (then the file cannot be found: no key is trusted from it)."""
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        value = os.environ.get(m[2]) if m[1] is None else "%" if m[1] == "%" else tokens.get(m[1])
        if value is None:
            missing = True
            return ""
        return value

    out = _PATH_TOKEN.sub(sub, path)
    return None if missing else os.path.expanduser(out)


def client_options(destination: str, config: Sequence[str], **kw: Any) -> asyncssh.SSHClientConnectionOptions:
    """asyncssh's reading of the ssh_config for `destination` (HostName, Port, User, HostKeyAlias, ...)."""
    return asyncssh.SSHClientConnectionOptions(config=list(config) or (), host=destination, **kw)


def known_hosts_for(destination: str, config: Sequence[str],
                    opts: asyncssh.SSHClientConnectionOptions | None = None) -> KnownHosts:
    """The known_hosts of `destination` under `config` (the transport's ssh_config files; empty: ~/.ssh/config),
    read as `ssh` reads them, never as "no checking":

    - UserKnownHostsFile's files (default ~/.ssh/known_hosts, ~/.ssh/known_hosts2), then GlobalKnownHostsFile's
      (default /etc/ssh/ssh_known_hosts, /etc/ssh/ssh_known_hosts2), each with `~`, `%d %u %i %h %n %p %r %k %l %L
      %%` and `${VAR}` expanded (a token it cannot expand, such as `%C`, leaves that file unread);
    - `none`, /dev/null, a file that does not exist, cannot be read or is empty: no entries from it. When no file
      gives any, no key is trusted: every host key is unknown and refused, as `ssh` refuses it;
    - StrictHostKeyChecking (no, off, accept-new) changes nothing: an unknown or changed key is never accepted,
      and nothing is ever written to a known_hosts file;
    - an entry that cannot be parsed is a ValueError naming its file (refused as a config problem).

    Blocking (it reads files): call it in a thread. `opts`: asyncssh's reading of the config, when at hand."""
    opts = opts or client_options(destination, config)
    cfg = getattr(opts, "config", None)
    home = os.path.expanduser("~")
    local = socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = ""
    tokens = {"h": str(opts.host), "n": destination, "p": str(opts.port), "r": str(opts.username or user),
              "k": str(opts.host_key_alias or destination), "l": local, "L": local.split(".", 1)[0]}
    if home != "~":
        tokens["d"] = home
    if user:
        tokens["u"] = user
    if hasattr(os, "getuid"):
        tokens["i"] = str(os.getuid())
    unread: list[str] = []
    off: list[str] = []
    named: list[str] = []
    record_in = ""
    for option, defaults in (("UserKnownHostsFile", DEFAULT_USER_KNOWN_HOSTS),
                             ("GlobalKnownHostsFile", DEFAULT_GLOBAL_KNOWN_HOSTS)):
        given = cfg.get(option, ()) if cfg is not None else ()
        if given == []:  # asyncssh's reading of `none`
            off.append(f"{option} none")
            continue
        explicit = isinstance(given, list)
        for raw in (given if explicit else defaults):
            path = _expand_path(str(raw), tokens)
            if path is None:
                unread.append(f"{raw} cannot be expanded")
                continue
            if option == "UserKnownHostsFile" and not record_in and path != os.devnull:
                record_in = path
            if path == os.devnull:
                off.append(f"{option} {os.devnull}")
                continue
            if not explicit and path != record_in and not os.path.exists(path):
                continue  # a default file that is not there is no news, but for the one `ssh` records keys in
            named.append(path)
    trusted = asyncssh.SSHKnownHosts()
    read: list[str] = []
    for path in dict.fromkeys(named):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            unread.append(f"{path} does not exist")
            continue
        except OSError as e:
            unread.append(f"{path} cannot be read: {e.strerror or e}")
            continue
        try:
            trusted.load(text)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        read.append(path)
    return KnownHosts(tuple(read), tuple(unread), tuple(off), record_in, trusted)


def known_hosts_checked(destination: str, config: Sequence[str]) -> KnownHosts:
    """`known_hosts_for` the host, once its ProxyJump hosts are known to be checked too (blocking)."""
    opts = client_options(destination, config)
    _check_jump_hosts(destination, config, opts)
    return known_hosts_for(destination, config, opts)


def _check_jump_hosts(destination: str, config: Sequence[str], opts: asyncssh.SSHClientConnectionOptions) -> None:
    """A ProxyJump host is connected by asyncssh itself, with its own reading of the ssh_config: refuse the one
    reading that turns checking off there (`UserKnownHostsFile none`, which asyncssh takes as "accept any key").
    Every other way of writing it fails closed in asyncssh too (no file, /dev/null: every key unknown). A hop's
    port that is no port (`²`, which isdigit() passes and int() refuses, `0`, `99999`) is refused in one line
    naming it: asyncssh would fail on it with a bare `invalid literal for int()`."""
    jumps = opts.tunnel
    if not isinstance(jumps, str):
        return
    for hop in jumps.split(","):
        user, _, host = hop.rpartition("@")
        port: int | tuple[()] = ()
        if ":" in host:
            host, _, port_s = host.rpartition(":")
            taken = whole_or_none(port_s, low=1, high=PORT_MAX, text=True)
            if taken is None:
                raise PermanentTransportError(
                    f"{destination}: the ProxyJump host {host!r} in ssh_config {config_desc(config)} has the port "
                    f"{port_s[:20]!r}, which is not a port (1..{PORT_MAX}); refusing to connect", kind="config")
            port = taken
        opts = client_options(host, config, port=port, username=user or ())
        if opts.known_hosts is None:
            raise PermanentTransportError(
                f"{destination}: the ProxyJump host {host} has `UserKnownHostsFile none` in ssh_config "
                f"{config_desc(config)}, which would connect to it without checking its host key; refusing to "
                "connect. Name a known_hosts file for it", kind="host-key-unknown")


async def refused_host_key(destination: str, config: Sequence[str], e: asyncssh.HostKeyNotVerifiable, addr: str,
                           kh: KnownHosts) -> TransportError:
    """Why the host's key was refused, against the known_hosts bringup read (`kh`): unknown (with the files and
    the ssh_config in use, or why no file was read) or CHANGED since it was recorded (possibly a
    man-in-the-middle; never offered to be accepted as is), or @revoked. All are permanent."""
    try:
        opts = await asyncio.to_thread(client_options, destination, config)
    except Exception:  # the connection got far enough to read them, so this is not expected
        return classify(destination, e, config)
    host = str(opts.host_key_alias or opts.host)
    port = whole_or_none(opts.port, low=1, high=PORT_MAX, text=True)  # a port that is none: as if not named
    port = port if port != 22 else None
    cfg = config_desc(config)
    who = destination
    if host != destination:
        who += f" ({host} port {port})" if port else f" ({host})"
    entries = await asyncio.to_thread(known_host_entries, kh.read, host, addr, port)
    if "revoked" in e.reason.lower():
        return PermanentTransportError(f"{destination}: the host key of {who} is marked @revoked in "
                                       f"{', '.join(kh.read)}; refusing to connect", kind="host-key-revoked")
    if entries:
        first = entries[0]
        offered = await offered_key(destination, config, [x.algorithm for x in entries])
        now = f" (it now offers {offered})" if offered else ""
        return PermanentTransportError(
            f"{destination}: the host key of {who} has CHANGED since it was recorded in "
            f"{first.file}:{first.line}{now} — possibly a man-in-the-middle; refusing to connect. If the host "
            f"was reinstalled, remove the old key with `ssh-keygen -R {shlex.quote(first.name)} -f "
            f"{shlex.quote(first.file)}`, then check the new key's fingerprint with the host's owner before "
            "connecting again", kind="host-key-changed")
    name = f"[{host}]:{port}" if port else host
    offered = await offered_key(destination, config, OPENSSH_HOST_KEY_ORDER)  # the key `ssh` will show
    check = f"its fingerprint ({offered})" if offered else "its fingerprint"
    if kh.read:  # the settings that name no file are no news next to files that were read
        where = ", ".join(kh.read) + (f" ({'; '.join(kh.unread)})" if kh.unread else "")
    else:
        why = [*kh.off, *kh.unread]
        where = "any known_hosts file" + (f" ({'; '.join(why)})" if why else "")
    if kh.record_in:
        accept = f"`ssh {destination}`"
        if config:
            accept += (f" with the same config (`ssh -F {shlex.quote(config[0])} -o StrictHostKeyChecking=ask "
                       f"{destination}`)")
        then = f"accept it once with {accept}, which records it in {kh.record_in}"
    else:
        then = f"add it to a known_hosts file named by UserKnownHostsFile in {cfg} (which names none now)"
    return PermanentTransportError(
        f"{destination}: unknown SSH host key for {name}: it is not in {where}, the known_hosts of ssh_config "
        f"{cfg}; refusing to connect. Check {check} with the host's owner, then {then}",
        kind="host-key-unknown")
