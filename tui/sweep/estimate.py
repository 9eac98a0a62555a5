"""How long a sweep will take, said before it is run (`bringup sweep --dry-run`): a restart per configuration, from
the history's start-to-ready when it knows one, and the matrix's waves of requests. Pure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tui.sweep.plan import Plan
from tui.words import plural

#: the estimate's assumptions, printed with it
ASSUMED_RESTART_S = 300.0
ASSUMED_DECODE_TOK_S = 30.0
#: how many of the newest runs that reached ready the restart figure is taken from
RESTART_RUNS = 5


@dataclass(frozen=True, slots=True)
class RestartFigure:
    """Seconds a restart takes, for the estimate: the median start-to-ready of the newest runs on record that
    reached ready (`runs` of them), else `ASSUMED_RESTART_S` (`runs` 0). Issue 51: the estimate assumed 300 s when
    the history knew 28 s."""

    seconds: float
    runs: int = 0

    def words(self) -> str:
        if not self.runs:
            return f"{self.seconds:g} s per restart (assumed: no run on record reached ready)"
        return (f"{self.seconds:.0f} s per restart (the median start-to-ready of the last "
                f"{plural(self.runs, 'ready run')} on record)")


def restart_figure(ready_after_s: Sequence[float], newest: int = RESTART_RUNS) -> RestartFigure:
    """`ready_after_s`: the start-to-ready seconds of the runs on record that reached ready, oldest first."""
    recent = [s for s in ready_after_s if math.isfinite(s) and s >= 0][-newest:]
    if not recent:
        return RestartFigure(ASSUMED_RESTART_S)
    return RestartFigure(statistics.median(recent), len(recent))


def estimate_s(plan: Plan, restart_s: float = ASSUMED_RESTART_S, decode_tok_s: float = ASSUMED_DECODE_TOK_S) -> float:
    """A rough duration: a restart per configuration, warmup, and per cell `ceil(requests / concurrency)` waves of
    requests that each decode `output_tokens` at `decode_tok_s` per stream (or `duration_s`)."""
    m = plan.matrix
    per_config = restart_s + m.warmup_requests * (min(m.output_tokens) / decode_tok_s + 0.5)
    cells = 0.0
    for c in plan.cells:
        n = plan.requests_for(c)
        wave = c.output_tokens / decode_tok_s + 0.5
        cells += (m.duration_s or 0.0) if n is None else math.ceil(n / c.concurrency) * wave
    return len(plan.configs) * (per_config + cells)
