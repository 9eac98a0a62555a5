"""Runs that fail one after another: a crash loop, told as one answer instead of the newest run alone.

Under a service manager that restarts what dies (systemd's `Restart=`), each failed run is followed at once by the
next one's start, and a new run forgets the last (state.py `new_invocation`): the answer was "starting", and the
failure just before it, with its cause and the worker that died, was gone. The reducer keeps the runs that failed one
after another (`LifecycleState.earlier`); this module says what they add up to: how many failed, over how long, and
the last failure with its cause, which stays on screen and in `status` while the loop goes on. Pure.
"""

from __future__ import annotations

import re

from tui.lifecycle.state import LifecycleState
from tui.model import CrashLoop, Failure, Phase

#: the excerpt's line that names an exception (`ValueError: ...`): what says most of a failure's cause
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure)\b")


def cause_of(f: Failure) -> str:
    """The line of a failure that says most: the last naming an exception, else its last line (cut to 300)."""
    lines = [x.strip() for x in f.excerpt if x.strip()]
    line = next((x for x in reversed(lines) if _EXCEPTION.match(x)), lines[-1] if lines else "")
    return line[:300]


def crash_loop(s: LifecycleState) -> CrashLoop | None:
    """The runs failed one after another up to the current one (the current one too, when it failed): None when no
    run before it failed, or it is ready (the loop is over)."""
    if not s.earlier or s.phase == Phase.READY:
        return None
    last = s.failure if s.phase == Phase.FAILED and s.failure is not None else s.earlier[-1].failure
    failed = len(s.earlier) + (last is s.failure)
    first = s.earlier[0]
    since = first.started_at if first.started_at is not None else first.failure.at
    restarts = s.unit.n_restarts if s.unit is not None else 0
    return CrashLoop(failed=failed, since=since, last=last, cause=cause_of(last), restarts=restarts)
