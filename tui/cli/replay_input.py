"""The lines of a log `bringup replay` reads, as they come: a file or stdin, never read whole (a 176 MB log took
812 MB when it was), a file that is no log refused from its first bytes (`lifecycle.replay.binary_kind`)."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import cast

from tui.lifecycle.replay import binary_kind

from .args import UsageError

#: the bytes read to tell a binary file
HEAD_BYTES = 8192
#: the longest line read as one: a longer one (a file with no newline) is read in pieces of this many characters,
#: so that memory stays bounded whatever the file
LINE_CHARS = 1 << 20


def log_lines(path: str) -> tuple[str, Iterator[str]]:
    """The log's name in messages ("stdin" for `-`) and its lines, decoded as UTF-8 (undecodable bytes replaced).
    Raises UsageError for a file that cannot be opened or is no text log."""
    name = "stdin" if path == "-" else path
    try:
        raw = cast(io.BufferedReader, sys.stdin.buffer) if path == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None
    buffered = raw
    try:
        head = buffered.peek(HEAD_BYTES)[:HEAD_BYTES]
    except OSError as e:
        raw.close()
        raise UsageError(f"{path}: {e.strerror or e}") from None
    what = binary_kind(head)
    if what is not None:
        if path != "-":
            raw.close()
        raise UsageError(f"{name}: {what}")
    return name, _lines(buffered, close=path != "-")


def _lines(fh: io.BufferedReader, *, close: bool) -> Iterator[str]:
    text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline=None)
    try:
        while line := text.readline(LINE_CHARS):
            yield line.rstrip("\n")
    finally:
        if close:
            text.close()
        else:
            text.detach()
