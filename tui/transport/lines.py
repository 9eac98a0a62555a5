"""Incremental splitting of a byte stream into text lines.

Written by hand because asyncio's readline() raises on lines longer than its buffer limit and knows nothing of
tqdm's carriage returns; here both newline and carriage return end a line, invalid UTF-8 is replaced, and an
overlong line is cut instead of breaking the stream.
"""

from __future__ import annotations

import codecs
import re

MAX_LINE = 65_536
_SPLIT = re.compile(r"\r\n|\r|\n")


class LineSplitter:
    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""
        self._max = max_line

    def feed(self, data: bytes) -> list[str]:
        text = self._partial + self._decoder.decode(data)
        parts = _SPLIT.split(text)
        self._partial = parts.pop()
        if len(self._partial) > self._max:
            parts.append(self._partial[: self._max])
            self._partial = ""
        return [p for p in parts if p]

    def flush(self) -> list[str]:
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        return [rest] if rest else []
