"""A deployment's past runs, as its run history holds them (tui/lifecycle/history.py): three runs of one command
line that reached ready, each phase's length known, the base of an ETA."""

from __future__ import annotations

from tui.lifecycle.history import Observed, record_of
from tui.lifecycle.run_record import RunRecord
from tui.model import Phase, Transition

T0 = 1_800_000_000.0
ARGV = ("python3", "-m", "sglang.launch_server", "--model-path", "/m/k26", "--tp-size", "8")
#: three past runs: starting 5 s, loading 60/70/80 s, graph capture 20 s, warmup 10 s -> ready after 95/105/115 s
LOADING = (60.0, 70.0, 80.0)


def past_run(i: int, loading: float, argv: tuple[str, ...] = ARGV) -> RunRecord:
    at = T0 + i * 1000
    marks = [(Phase.STARTING, 0.0), (Phase.LOADING, 5.0), (Phase.GRAPH_CAPTURE, 5.0 + loading),
             (Phase.WARMUP, 25.0 + loading), (Phase.READY, 35.0 + loading)]
    tl = tuple(Transition(p, at + dt) for p, dt in marks)
    return record_of(Observed("k26", f"past{i}", at, argv, tl, Phase.READY, tl[-1].at), None)


def history(argv: tuple[str, ...] = ARGV) -> list[RunRecord]:
    return [past_run(i, x, argv) for i, x in enumerate(LOADING)]


NOW_START = T0 + 10_000
