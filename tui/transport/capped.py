"""A command's output read within a bound, whatever the command prints (issue 47.4).

`Transport.run` holds all a command prints until it ends: a run's whole journal read that way (1.2 GB) took
`bringup status` to 4.0 GB of RSS and 145 s. A log read back goes through `read_capped` instead, the one place its
bound is kept: the command's lines are read as they come (`Transport.stream`) and counted in characters, with one
of two ways to stay within `limit`:

- `Keep.FIRST`: the first lines up to `limit`; then the command is ended (closing the stream kills it), so a
  command that could print gigabytes costs what `limit` costs, in memory and in time.
- `Keep.LAST`: read to the end, keeping only the last lines within `limit` (for a command that prints a bounded
  count of lines, of any length: `docker logs --tail N`).

At most `limit` characters are kept, plus one line (a line is never cut here; the transports deliver a line of up to
`STREAM_MAX_LINE`, tui/transport/local.py). `cut` says that the command had more to print than what is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from tui.transport import Transport, TransportError


class Keep(enum.Enum):
    FIRST = "first"
    LAST = "last"


@dataclass(frozen=True, slots=True)
class Capped:
    """What was kept of a command's output, in the order printed."""

    lines: list[str]
    #: more was printed (or would have been) than `lines`: after them (Keep.FIRST) or before them (Keep.LAST)
    cut: bool
    #: characters kept, each line counted with its end
    size: int


async def read_capped(transport: Transport, argv: Sequence[str], *, limit: int, keep: Keep = Keep.FIRST,
                      timeout: float = 60.0) -> Capped:
    """`argv`'s stdout as lines, at most `limit` characters of them (plus one line) kept (module docstring);
    TransportError when it does not end (or reach the bound) within `timeout` seconds."""
    if limit <= 0:
        raise ValueError(f"a bound of {limit} characters reads nothing")
    kept: deque[str] = deque()
    size = 0
    cut = False
    try:
        async with asyncio.timeout(timeout):
            async with contextlib.aclosing(transport.stream(argv)) as lines:
                async for line in lines:
                    if keep is Keep.FIRST and size >= limit:
                        cut = True  # a line past the bound: there is more, and the command is ended here
                        break
                    kept.append(line)
                    size += len(line) + 1
                    while keep is Keep.LAST and size > limit and len(kept) > 1:
                        size -= len(kept.popleft()) + 1
                        cut = True
    except TimeoutError:
        raise TransportError(f"{transport.name}: {argv[0]!r} did not finish within {timeout:g} s",
                             kind="timeout") from None
    return Capped(list(kept), cut, size)
