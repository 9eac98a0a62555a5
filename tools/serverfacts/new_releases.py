"""Which released versions of a server have no facts yet: asked of pip's configured package index (`pip index
versions`, the index's ordinary client, so whatever index and certificates pip is set up with are the ones used; no
other host), compared with the facts committed. A run by hand before work on the presets (`python -m
tools.serverfacts --new`), never a test: the tests never reach the network."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence

from tui.lifecycle.presets.facts import version_key

__all__ = ["IndexError_", "index_versions", "missing_releases", "parse_index_versions"]

_AVAILABLE = re.compile(r"^Available versions:\s*(?P<list>.*)$", re.MULTILINE)
#: a final release (`0.5.23`, `0.10.1.1`, `0.5.15.post1`): pre-releases and dev builds are not what people run
_FINAL = re.compile(r"\d+(?:\.\d+)*(?:\.post\d+)?")


class IndexError_(Exception):
    """The index could not be asked, or answered nothing readable (the message is one line)."""


def parse_index_versions(text: str) -> list[str]:
    """The versions of `pip index versions NAME`'s answer (`Available versions: 0.5.23, 0.5.22, ...`)."""
    m = _AVAILABLE.search(text)
    if m is None:
        return []
    return [v.strip() for v in m["list"].split(",") if v.strip()]


def index_versions(server: str, timeout: float = 120) -> list[str]:
    """Every version pip's index lists for `server`."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", server]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise IndexError_(f"{server}: pip index versions failed: {e}") from e
    found = parse_index_versions(p.stdout)
    if p.returncode != 0 or not found:
        last = (p.stderr.strip().rsplit("\n", 1) or ["(no output)"])[-1].strip() or "(no output)"
        raise IndexError_(f"{server}: pip index versions listed nothing (exit {p.returncode}): {last}")
    return found


def missing_releases(available: Sequence[str], known: Sequence[str]) -> list[tuple[str, str]]:
    """The final releases the index has and the facts lack, from the oldest release with facts on, oldest first,
    each with why it matters: newer than every release with facts (bringup goes by the newest's), or between two
    (the closest older one's stand in). Empty `known`: every final release is missing."""
    have = {version_key(v) for v in known}
    keyed = sorted(((version_key(v), v) for v in available if _FINAL.fullmatch(v)), key=lambda kv: kv[0])
    ordered = sorted(known, key=version_key)
    out = []
    for key, version in keyed:
        if key in have or (ordered and key < version_key(ordered[0])):
            continue
        older = [k for k in ordered if version_key(k) < key]
        if not ordered:
            out.append((version, "no release of this server has facts"))
        elif not [k for k in ordered if version_key(k) > key]:
            out.append((version, f"newer than every release with facts (goes by {ordered[-1]})"))
        else:
            out.append((version, f"between releases with facts (goes by {older[-1]})"))
    return out
