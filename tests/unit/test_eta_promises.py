"""An ETA promises no ready-time it cannot keep (issue 51, finding 4): with the shard bar frozen at 37% before the
stall threshold, the countdown grew every reading ("ready in ~13s, ~21s, ~28s"); and a basis of runs with graphs
off left graph capture out ("ready in ~4.3s", then 8.2 s of capture) though earlier runs on record had it."""

from __future__ import annotations

from tests.helpers.past_runs import ARGV, NOW_START, T0, history
from tui.lifecycle.eta import estimate, eta_words
from tui.lifecycle.history import Observed, options, record_of
from tui.lifecycle.run_record import RunRecord
from tui.model import EtaMatch, NoEta, Phase, PhaseEta, Transition

BAR = "Loading safetensors checkpoint shards:  37% Completed | 24/64 [00:24<00:40,  1.00it/s]"
TL = (Transition(Phase.STARTING, NOW_START), Transition(Phase.LOADING, NOW_START + 5))


def _loading(now_s: float, line_s: float) -> PhaseEta | NoEta | None:
    """The ETA `now_s` into loading, the bar's line having come `line_s` into it."""
    return estimate(history(), deployment="k26", invocation="now", flags=options(ARGV), phase=Phase.LOADING,
                    timeline=TL, now=NOW_START + 5 + now_s, latest_line=BAR, line_at=NOW_START + 5 + line_s)


def test_between_two_progress_lines_the_time_left_counts_down() -> None:
    readings = [_loading(24.0 + dt, 24.0) for dt in (0.0, 0.5, 1.0, 1.5)]
    lefts = [e.ready_left_s for e in readings if isinstance(e, PhaseEta)]
    assert len(lefts) == 4 and lefts == sorted(lefts, reverse=True) and lefts[0] > lefts[-1], readings


def test_progress_frozen_past_its_own_pace_promises_no_ready_time() -> None:
    # 24 shards in 24 s: a line a second; 3 s without one is frozen, long before a 60 s stall
    e = _loading(24.0 + 3.5, 24.0)
    assert isinstance(e, NoEta), e
    assert "no progress in loading for 4 s" in e.reason and "37%" in e.reason, e.reason
    assert "ready in" not in eta_words(e)


def _run(i: int, graphs: bool, argv: tuple[str, ...]) -> RunRecord:
    at = T0 + i * 1000
    capture = 8.0 if graphs else 0.0
    marks = [(Phase.STARTING, 0.0), (Phase.LOADING, 1.0), (Phase.WARMUP, 4.0 + capture), (Phase.READY, 5.0 + capture)]
    if graphs:
        marks.insert(2, (Phase.GRAPH_CAPTURE, 4.0))
    tl = tuple(Transition(p, at + dt) for p, dt in sorted(marks, key=lambda m: m[1]))
    return record_of(Observed("k26", f"r{i}", at, argv, tl, Phase.READY, tl[-1].at), None)


def test_a_phase_the_basis_skipped_but_other_runs_had_is_in_the_eta() -> None:
    off = (*ARGV, "--disable-cuda-graph")
    # a run one flag apart too (another --tp-size), a smaller group so not the basis, went through graph capture
    runs = [_run(0, True, (*off[:-3], "--tp-size", "4")), _run(1, False, off), _run(2, False, off)]
    e = estimate(runs, deployment="k26", invocation="now", flags=options(ARGV), phase=Phase.LOADING, timeline=TL,
                 now=NOW_START + 5)
    assert isinstance(e, PhaseEta) and e.basis.match == EtaMatch.ONE_FLAG_APART, e
    assert e.basis.differs == "--disable-cuda-graph"
    # loading 3 s + warmup 1 s from the basis, and graph capture 8 s from the run on record that had it
    assert e.ready_left_s == 12.0, e
    assert "with graph-capture ~8.0s from earlier runs that had it" in eta_words(e), eta_words(e)
