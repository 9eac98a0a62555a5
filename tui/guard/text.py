"""The one way text from outside is cut into lines (issue 47.2): a server's log, live or read back, a journal, a
command's output, a file.

A line ends at "\\r\\n", "\\r" or "\\n", and nowhere else. `str.splitlines()` also ends one at \\x0b, \\x0c, \\x1c,
\\x1d, \\x1e, \\x85, \\u2028 and \\u2029: a server that prints one of those inside a line makes two lines of it, and
the second begins with whatever the server chose. The process manager's log is `<epoch> <text>` per line, so a
server that printed `x\\x1cinf Loading weights` forged a line with a time of its choosing (`inf` put Infinity in
the run history, and every later `wait`, `record` and console start failed with OverflowError) and a phase of its
choosing. Cutting at the three real line ends keeps a server's line one line, whatever it holds.

`tests/infra/test_one_line_splitter.py` fails on any `.splitlines(` in `tui/` or `widgets/` outside this module
(the instrument `tui/sim/` aside). The supervisor (`tui/managers/supervisor.py`), which is
sent to the server's host as source and imports nothing of bringup's, cuts with the same three ends itself.
"""

from __future__ import annotations

import re

#: the line ends, the longest first (so "\r\n" is one end, not two)
LINE_END = re.compile(r"\r\n|\r|\n")
LINE_END_BYTES = re.compile(rb"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """`text` cut at "\\r\\n", "\\r" and "\\n" only, as `str.splitlines()` would cut it were those the only line
    ends: no empty piece after a final line end, none at all for "" ."""
    if not text:
        return []
    parts = LINE_END.split(text)
    if not parts[-1]:
        parts.pop()
    return parts


def split_byte_lines(data: bytes) -> list[bytes]:
    """`split_lines` for bytes not yet decoded."""
    if not data:
        return []
    parts = LINE_END_BYTES.split(data)
    if not parts[-1]:
        parts.pop()
    return parts
