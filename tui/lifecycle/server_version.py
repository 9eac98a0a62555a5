"""A server's release, as the server states it: read off a start-up line, or checked in its HTTP answer.

The release decides which facts (flags, metric names, wordings) bringup goes by, so it is only ever what the
server said, never inferred from a wording or a flag. The text comes from the server and ends up on screens, in
JSON and in a Prometheus label: only a plain release string of bounded length is taken (digits, letters and
`. + _ -`), so no markup, escape or control character can ride along; anything else leaves the release unknown.
"""

from __future__ import annotations

import re

from tui.lifecycle.presets import Alternation

__all__ = ["MAX_VERSION", "release_in_line", "release_version"]

#: a release longer than this is not taken (a local version such as `0.10.2.dev378+g4d7fe40fc.d20250829` is 34)
MAX_VERSION = 64
#: `0.5.23`, `0.10.1.1`, `0.5.5.post1`, `0.11.0rc2`, `0.10.2.dev378+g4d7fe40fc.d20250829`, `0.5.23-sim`: at least
#: `N.N`, then letters, digits and `. + _ -`
_VERSION = re.compile(r"\d+(?:\.\d+)+[0-9A-Za-z.+_-]*")
_TRAILING = ".+_-"


def release_version(text: str) -> str | None:
    """The release a server's answer names, or None when the text is not a plain release string."""
    text = text.strip()
    if text[:1] in ("v", "V"):
        text = text[1:]
    m = _VERSION.fullmatch(text)
    if m is None or len(text) > MAX_VERSION or text != text.rstrip(_TRAILING):
        return None
    return text


def release_in_line(text: str, wordings: Alternation) -> str | None:
    """The release a clean log line states: the one right after the first wording it matches (`vLLM API server
    version 0.10.1.1`, `Initializing a V1 LLM engine (v0.11.0) with config`), or None."""
    m = wordings.search(text)
    if m is None:
        return None
    v = _VERSION.match(text, m.end())
    if v is None:
        return None
    version = v.group(0).rstrip(_TRAILING)
    return version if len(version) <= MAX_VERSION else None
