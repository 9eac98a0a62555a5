"""The entries of known_hosts files that name a host, and the key the host offers now: what the words of a refused
host key are made of (`ssh_known_hosts.refused_host_key`).

asyncssh only says "Host key is not trusted". An operator needs to know which it is: an *unknown* key or a *changed*
one (where it was recorded, and that this may be a man-in-the-middle). Checking is never turned off; this module
only reads known_hosts files and asks the host which key it offers.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from tui.guard.text import split_lines

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
                lines = split_lines(f.read())
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
    except (OSError, asyncssh.Error, TimeoutError, ValueError, OverflowError):  # Overflow: a port out of range
        return ""
    return f"{key.get_algorithm()} key {key.get_fingerprint()}" if key is not None else ""
