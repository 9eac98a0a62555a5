"""A process id read from outside: systemd's MainPID, a cgroup's `cgroup.procs`, `docker top`, the lock's record
and the lock script's answer on a host.

Each reader used to check `x.isdigit()` and call `int(x)`; but `"²".isdigit()` is True and `int("²")` raises, and
so do 5,000 digits (Python's limit on a number's digits), so one odd word in a command's output crashed the unit's
reading. A pid is taken here, through the one parser of numbers from outside (tui/guard/numbers.py): a whole number
from 1 to Linux's PID_MAX_LIMIT, anything else no pid at all (`-1`, `0`, `inf`, `true`, `²`, 30 digits).
"""

from __future__ import annotations

from collections.abc import Iterable

from tui.guard.numbers import whole_or_none

#: the largest pid Linux gives (PID_MAX_LIMIT, 2**22)
PID_MAX = 1 << 22


def pid_or_none(value: object, *, text: bool = True) -> int | None:
    """`value` as a pid (1..PID_MAX), or None. `text=False` for a field of a JSON record we wrote as a number:
    there a pid in quotes is no pid."""
    return whole_or_none(value, low=1, high=PID_MAX, text=text)


def pids_in(words: Iterable[str]) -> set[int]:
    """The pids among `words` (a command's output split into words), the rest left out."""
    return {pid for word in words if (pid := pid_or_none(word)) is not None}
