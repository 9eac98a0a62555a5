"""Why an SSH host's key was refused, in words an operator can act on.

asyncssh only says "Host key is not trusted". An operator needs to know which it is: an *unknown* key (which
known_hosts files and ssh_config were read, and how to accept the key once with `ssh`) or a *changed* one (where it
was recorded, and that this may be a man-in-the-middle: never offered to be accepted as is). Both are permanent.
Checking is never turned off; this module only reads known_hosts files and asks the host which key it offers.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from tui.transport import PermanentTransportError, TransportError
from tui.transport.ssh_errors import classify, config_desc

#: OpenSSH's preference among plain host keys: the key `ssh` shows for a host is the first the host has
OPENSSH_HOST_KEY_ORDER = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                          "rsa-sha2-512", "rsa-sha2-256")


@dataclass(frozen=True, slots=True)
class KnownHostEntry:
    file: str
    line: int
    #: the name to give `ssh-keygen -R` for this entry
    name: str
    algorithm: str
    fingerprint: str


def _lookup_names(host: str, addr: str, port: int | None) -> list[str]:
    names = [f"[{host}]:{port}", host] if port else [host]
    if addr and addr != host:
        names += [f"[{addr}]:{port}", addr] if port else [addr]
    return names


def known_host_entries(files: Sequence[str], host: str, addr: str, port: int | None) -> list[KnownHostEntry]:
    """Every line of `files` that trusts a key (or a CA) for host/addr/port, as asyncssh matches them (a
    non-default port first, then the bare name)."""
    names = _lookup_names(host, addr, port)
    out: list[KnownHostEntry] = []
    for path in files:
        try:
            with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for no, text in enumerate(lines, 1):
            stripped = text.strip()
            if not stripped or stripped.startswith("#"):
                continue
            try:
                match = asyncssh.import_known_hosts(stripped + "\n").match(host, addr, port)
            except (ValueError, asyncssh.KeyImportError):
                continue
            keys = [*match[0], *match[1]]
            if not keys:
                continue
            fields = stripped.split()
            patterns = (fields[1] if fields[0].startswith("@") and len(fields) > 1 else fields[0]).split(",")
            name = next((n for n in names if n in patterns), names[0])
            key = keys[0]
            out.append(KnownHostEntry(path, no, name, key.get_algorithm(), key.get_fingerprint()))
    return out


async def host_key_error(destination: str, config: Sequence[str], e: asyncssh.HostKeyNotVerifiable,
                         addr: str = "") -> TransportError:
    """Why the host's key was refused: unknown (with the known_hosts files and ssh_config in use) or CHANGED since
    it was recorded (possibly a man-in-the-middle; never offered to be accepted as is). Both are permanent.
    `config`: the transport's ssh_config files (empty: asyncssh's default); `addr`: the peer address connected to."""
    try:
        opts = asyncssh.SSHClientConnectionOptions(config=config or (), host=destination)
    except Exception:  # the connection got far enough to read them, so this is not expected
        return classify(destination, e, config)
    host = str(opts.host_key_alias or opts.host)
    port = int(opts.port) if opts.port and int(opts.port) != 22 else None
    listed = list(opts.known_hosts) if isinstance(opts.known_hosts, (list, tuple)) else []
    files = [f for f in listed if isinstance(f, str)] or ["~/.ssh/known_hosts"]  # asyncssh's default
    shown = [f for f in files if f != "/dev/null"] or files
    cfg = config_desc(config)
    who = destination
    if host != destination:
        who += f" ({host} port {port})" if port else f" ({host})"
    entries = await asyncio.to_thread(known_host_entries, files, host, addr, port)
    if "revoked" in e.reason.lower():
        return PermanentTransportError(f"{destination}: the host key of {who} is marked @revoked in "
                                       f"{', '.join(shown)}; refusing to connect", kind="host-key-revoked")
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
    accept = f"`ssh {destination}`"
    if config:
        accept += (f" with the same config (`ssh -F {shlex.quote(config[0])} -o StrictHostKeyChecking=ask "
                   f"{destination}`)")
    missing = [f for f in shown if f != "/dev/null" and not os.path.exists(os.path.expanduser(f))]
    none = f" ({', '.join(missing)} does not exist)" if missing else ""
    name = f"[{host}]:{port}" if port else host
    offered = await offered_key(destination, config, OPENSSH_HOST_KEY_ORDER)  # the key `ssh` will show
    check = f"its fingerprint ({offered})" if offered else "its fingerprint"
    return PermanentTransportError(
        f"{destination}: unknown SSH host key for {name}: it is not in {', '.join(shown)}{none}, the "
        f"known_hosts of ssh_config {cfg}; refusing to connect. Check {check} with the host's owner, "
        f"then accept it once with {accept}, which records it in {shown[0]}",
        kind="host-key-unknown")


async def offered_key(destination: str, config: Sequence[str], algorithms: Sequence[str]) -> str:
    """The type and fingerprint of the key the host offers now (best effort: "" on any failure)."""
    algs: list[str] = []
    for alg in algorithms:  # an RSA key is recorded as ssh-rsa, which OpenSSH 8.8+ no longer signs with
        algs += ["rsa-sha2-512", "rsa-sha2-256", alg] if alg == "ssh-rsa" else [alg]
    kwargs: dict[str, Any] = {"server_host_key_algs": list(dict.fromkeys(algs))} if algs else {}
    if config:
        kwargs["config"] = config
    try:
        async with asyncio.timeout(5):
            key = await asyncssh.get_server_host_key(destination, **kwargs)
    except (OSError, asyncssh.Error, TimeoutError, ValueError):
        return ""
    return f"{key.get_algorithm()} key {key.get_fingerprint()}" if key is not None else ""
