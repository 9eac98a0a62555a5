"""A warning when the config file in use may be someone else's (issue 29.12): a config names commands bringup runs
(`nvidia_smi`, a host's `ssh_config` whose ProxyCommand runs too), and `./config.toml` is picked up from whatever
directory bringup is started in. A file owned by another user (not root), or one that group or others may write,
is a way for another user to run commands as you: bringup still reads it (refusing would break shared setups that
are fine), and says so in one line on stderr, naming the file and its owner.

Limits: only the file itself is checked, not the directories above it, nor an `ssh_config` or a command it names.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path


def owner_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def config_trust_warning(path: Path | None) -> str | None:
    """One line saying why the config file in use is not to be trusted as it stands, or None (no file, or one owned
    by this user or root and writable by no one else)."""
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    why: list[str] = []
    foreign = st.st_uid not in (os.geteuid(), 0)
    if foreign:
        why.append(f"owned by {owner_name(st.st_uid)}, not by you or root")
    writable = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if st.st_mode & bit]
    if writable:
        why.append(f"writable by {' and '.join(writable)} (mode {stat.S_IMODE(st.st_mode):04o})")
    if not why:
        return None
    owner = "" if foreign else f" (owner {owner_name(st.st_uid)})"
    return (f"warning: the config file {path.expanduser().resolve()}{owner} is {' and '.join(why)}: it can name "
            "commands bringup runs (nvidia_smi, an ssh_config's ProxyCommand)")
