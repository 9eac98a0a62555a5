"""What the log panel remembers: the newest lines, and the errors apart with a bound of their own.

One bound for all lines let a busy server push its errors out: at 50 lines a second (a decode batch line per
step), a traceback was gone from a 50,000-line buffer in 17 minutes, and the buffer itself was 15 MiB when full. The
newest lines and the errors are kept with separate bounds, so a traceback stays until as many newer error lines
have come, however chatty the server is between them, and the memory is a fraction of what it was.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterator
from operator import itemgetter

#: the newest lines, of every kind: about 3 MiB for lines of 200 characters; `journalctl` or `bringup logs` has
#: the rest
LINES = 10_000
#: the newest errors, warnings and tracebacks' lines (and the run markers), kept after `LINES` newer lines pushed
#: them out of the newest lines
ERRORS = 5_000

_SEQ = itemgetter(0)


class LogBuffer:
    """Lines in the order they came, each numbered (its place among every line ever appended, which does not move
    when older lines are dropped) and marked an error or not. An error's text is one object in both bounds."""

    def __init__(self, lines: int = LINES, errors: int = ERRORS) -> None:
        self._lines: deque[str] = deque(maxlen=lines)
        #: (number, text), by number: the newest `errors` errors, including those still among the newest lines
        self._errors: deque[tuple[int, str]] = deque(maxlen=errors)
        self._next = 0

    @property
    def bound(self) -> int:
        """The most lines held at once: a view of them needs no more rows than this (unfolded)."""
        return (self._lines.maxlen or 0) + (self._errors.maxlen or 0)

    def append(self, text: str, is_error: bool) -> None:
        if is_error:
            self._errors.append((self._next, text))
        self._lines.append(text)
        self._next += 1

    def clear(self) -> None:
        self._lines.clear()
        self._errors.clear()

    def _first(self) -> int:
        """The number of the oldest of the newest lines."""
        return self._next - len(self._lines)

    def _older_errors(self) -> int:
        """How many errors are older than the newest lines."""
        return bisect_left(self._errors, self._first(), key=_SEQ)

    def __len__(self) -> int:
        return len(self._lines) + self._older_errors()

    def items(self) -> Iterator[tuple[int, str, bool]]:
        """(number, text, is an error) for every line held, oldest first."""
        first = self._first()
        errors = iter(self._errors)
        error = next(errors, None)
        while error is not None and error[0] < first:
            yield error[0], error[1], True
            error = next(errors, None)
        for seq, text in enumerate(self._lines, start=first):
            if error is not None and error[0] == seq:
                yield seq, text, True
                error = next(errors, None)
            else:
                yield seq, text, False

    def __iter__(self) -> Iterator[tuple[str, bool]]:
        for _, text, is_error in self.items():
            yield text, is_error
