"""The phase ETA (tui/lifecycle/eta.py) from past runs with known phase durations: within their spread, the server's
own progress weighed in, the nearest flags when none are the same (said so), "slower than" before a stall, and no
ETA at all without past runs (said so, never a guess)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.past_runs import ARGV, NOW_START, T0, history, past_run
from tui.lifecycle.eta import estimate, eta_words, progress_fraction
from tui.lifecycle.history import Observed, options, record_of
from tui.lifecycle.run_record import RunRecord
from tui.model import EtaMatch, NoEta, Phase, PhaseEta, Transition


def eta_in(runs: list[RunRecord], phase: Phase, elapsed: float, *, argv: tuple[str, ...] = ARGV,
           line: str = "") -> PhaseEta | NoEta | None:
    tl = [Transition(Phase.STARTING, NOW_START)]
    if phase != Phase.STARTING:
        tl.append(Transition(Phase.LOADING, NOW_START + 5))
    if phase in (Phase.GRAPH_CAPTURE, Phase.WARMUP):
        tl.append(Transition(Phase.GRAPH_CAPTURE, NOW_START + 75))
    if phase == Phase.WARMUP:
        tl.append(Transition(Phase.WARMUP, NOW_START + 95))
    return estimate(runs, deployment="k26", invocation="now", flags=options(argv), phase=phase, timeline=tl,
                    now=tl[-1].at + elapsed, latest_line=line)


def test_with_the_same_flags_the_eta_is_the_median_and_its_spread_the_past_runs() -> None:
    e = eta_in(history(), Phase.LOADING, 30.0)
    assert isinstance(e, PhaseEta)
    assert e.basis.match == EtaMatch.SAME_FLAGS and e.basis.runs == 3
    assert (e.basis.fastest_s, e.basis.slowest_s) == (95.0, 115.0)
    assert e.phase_left_s == 40.0  # the median loading (70 s) less the 30 s so far
    assert e.ready_left_s == 70.0  # and graph capture 20 s, warmup 10 s
    # the whole start-up it predicts lies within the past runs' spread
    assert e.basis.fastest_s <= 5 + 30 + e.ready_left_s <= e.basis.slowest_s
    assert eta_words(e) == "loading, ~40s left, ready in ~1m10s; last 3 runs 1m35s-1m55s"


@given(st.floats(0, 200))
def test_the_eta_never_goes_below_zero_and_shrinks_as_the_phase_goes_on(elapsed: float) -> None:
    a, b = eta_in(history(), Phase.LOADING, elapsed), eta_in(history(), Phase.LOADING, elapsed + 1)
    assert isinstance(a, PhaseEta) and isinstance(b, PhaseEta)
    assert 0 <= b.phase_left_s <= a.phase_left_s and 30.0 <= b.ready_left_s <= a.ready_left_s


def test_the_servers_own_progress_is_weighed_in() -> None:
    bar = "Loading safetensors checkpoint shards:  50% Completed | 32/64 [00:20<00:20,  1.60it/s]"
    assert progress_fraction(bar) == 0.5
    assert progress_fraction("Capturing batches (bs=8 avail_mem=12.3 GB): 8/20") == 0.4
    assert progress_fraction("Load weight end. elapsed=12.00 s") is None
    # 20 s for half the shards: the server's pace says 20 s more, the history 50 s more; halfway, half each
    e = eta_in(history(), Phase.LOADING, 20.0, line=bar)
    assert isinstance(e, PhaseEta) and e.progress == 0.5
    assert e.phase_left_s == 35.0
    assert eta_words(e).startswith("loading 50%, ~35s left")


def test_no_run_with_the_same_flags_falls_back_to_one_flag_apart_and_says_so() -> None:
    runs = history((*ARGV, "--disable-cuda-graph"))
    e = eta_in(runs, Phase.LOADING, 10.0)
    assert isinstance(e, PhaseEta)
    assert e.basis.match == EtaMatch.ONE_FLAG_APART and e.basis.differs == "--disable-cuda-graph"
    assert "last 3 runs 1m35s-1m55s (flags as these but --disable-cuda-graph)" in eta_words(e)
    # the same flags win over the nearest ones as soon as there is one
    e2 = eta_in([*runs, past_run(9, 100.0)], Phase.LOADING, 10.0)
    assert isinstance(e2, PhaseEta) and e2.basis.match == EtaMatch.SAME_FLAGS and e2.basis.runs == 1


def test_no_history_or_runs_two_flags_apart_give_no_eta_and_say_why() -> None:
    none = eta_in([], Phase.LOADING, 10.0)
    assert isinstance(none, NoEta) and "no past run of k26 has reached ready" in none.reason
    far = eta_in(history((*ARGV, "--disable-cuda-graph", "--enable-metrics")), Phase.LOADING, 10.0)
    assert isinstance(far, NoEta) and "with these flags, or all but one" in far.reason
    assert eta_in(history(), Phase.READY, 0.0) is None  # nothing is starting: no ETA to speak of


def test_slower_than_every_past_run_is_said_before_a_stall() -> None:
    assert isinstance(e := eta_in(history(), Phase.LOADING, 95.0), PhaseEta) and e.slower == ""  # 80 * 1.25 = 100
    e = eta_in(history(), Phase.LOADING, 119.0)
    assert isinstance(e, PhaseEta)
    assert e.slower == "loading 70% slower than the last 3 runs"  # 119 s against the usual 70 s
    assert e.phase_left_s == 0.0 and e.ready_left_s == 30.0  # overdue: the later phases still to come
    assert eta_words(e).endswith("; loading 70% slower than the last 3 runs")


def test_a_run_of_the_history_is_not_its_own_past() -> None:
    runs = history()
    tl = [Transition(Phase.STARTING, T0), Transition(Phase.LOADING, T0 + 5)]
    e = estimate(runs, deployment="k26", invocation="past2", flags=options(ARGV), phase=Phase.LOADING,
                 timeline=tl, now=T0 + 6)
    assert isinstance(e, PhaseEta) and e.basis.runs == 2
    # the first run on record, read back once ready (`wait` on a ready run): no "this one will be the first"
    assert estimate(runs[:1], deployment="k26", invocation="past0", flags=options(ARGV), phase=Phase.LOADING,
                    timeline=tl, now=T0 + 6) is None
    under_way = record_of(Observed("k26", "now", T0, ARGV, tuple(tl), Phase.LOADING, T0 + 6), runs[-1])
    e = estimate([*runs, under_way], deployment="k26", invocation="now", flags=options(ARGV), phase=Phase.LOADING,
                 timeline=tl, now=T0 + 6)
    assert isinstance(e, PhaseEta) and e.basis.runs == 3
