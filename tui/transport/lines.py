"""Incremental splitting of a byte stream into text lines.

Written by hand because asyncio's readline() raises on lines longer than its buffer limit and knows nothing of
tqdm's carriage returns; here both newline and carriage return end a line, invalid UTF-8 is replaced, and an
overlong line is cut instead of breaking the stream.
"""

from __future__ import annotations

import codecs

from tui.guard.text import LINE_END as _SPLIT  # the one set of line ends (tui/guard/text.py)

MAX_LINE = 65_536


class LineSplitter:
    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""
        self._max = max_line
        self._skipping = False  # the rest of an overlong line, already emitted cut, is being dropped

    def feed(self, data: bytes) -> list[str]:
        text = self._partial + self._decoder.decode(data)
        parts = _SPLIT.split(text)
        self._partial = parts.pop()
        out = []
        for p in parts:
            if self._skipping:
                self._skipping = False
                continue
            if p:
                out.append(p[: self._max])
        if len(self._partial) > self._max:
            if not self._skipping:
                out.append(self._partial[: self._max])
            self._skipping = True
            self._partial = ""
        return out

    def flush(self) -> list[str]:
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        skipping, self._skipping = self._skipping, False
        return [rest[: self._max]] if rest and not skipping else []
