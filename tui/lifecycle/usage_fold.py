"""A refused command line's excerpt with argparse's usage folded to one line (issue 51: a bad-args failure printed
40 lines of usage before the one line that matters, `launch_server.py: error: unrecognized arguments: --foo`).

argparse prints `usage: PROG [-h] [--flag FLAG] ...` wrapped onto lines indented under it, then `PROG: error: ...`.
A usage's first line stays (it names the program), its wrapped lines go, said as a count; an excerpt cut inside the
usage (it keeps the last lines only) starts with wrapped lines, folded the same where the error line follows. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

from tui.lifecycle.lines import clean

_ERROR = re.compile(r"^\S+: error: ")


def _wrapped(line: str) -> bool:
    text = clean(line).text
    return bool(text.strip()) and text[0].isspace()


def fold_usage(excerpt: Iterable[str]) -> list[str]:
    """The excerpt with each argparse usage block's wrapped lines replaced by a count."""
    lines = list(excerpt)
    out: list[str] = []
    i = 0
    while i < len(lines):
        usage = clean(lines[i]).text.startswith("usage: ")
        start = i + 1 if usage else i
        j = start
        while j < len(lines) and _wrapped(lines[j]):
            j += 1
        errs = j < len(lines) and _ERROR.match(clean(lines[j]).text) is not None
        if j - start > 1 and (usage or (i == 0 and errs)):
            left_out = f"({j - start} {'more ' if usage else ''}lines of usage left out)"
            out.append(f"{lines[i]} ... {left_out}" if usage else left_out)
            i = j
            continue
        out.append(lines[i])
        i += 1
    return out
