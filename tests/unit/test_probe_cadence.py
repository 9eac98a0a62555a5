"""The readiness probe's cadence: fast while the phase is in question, slow once the counters prove the run alive."""

from __future__ import annotations

from tui.engine.cadence import Pace, ProbeCadence
from tui.model import Phase, ThroughputSample


def tp(at: float, tps: float | None, running: int | None = None, queued: int | None = None,
       source: str = "metrics") -> ThroughputSample:
    return ThroughputSample(at=at, tokens_per_s=tps, source=source, running=running, queued=queued)


def test_fast_until_ready_and_until_any_counter_was_seen() -> None:
    c = ProbeCadence()
    assert c.pace(100.0, Phase.WARMUP) is Pace.FAST
    assert c.pace(100.0, Phase.READY) is Pace.FAST  # ready, but nothing proves it alive yet
    c.sampled(tp(100.0, 250.0, running=3))
    assert c.pace(100.5, Phase.READY) is Pace.SLOW
    assert c.pace(100.5, Phase.LOADING) is Pace.FAST


def test_idle_by_the_servers_own_gauges_is_alive_but_an_idle_log_line_proves_nothing() -> None:
    c = ProbeCadence()
    c.sampled(tp(10.0, 0.0, running=0, queued=0))
    assert c.pace(11.0, Phase.READY) is Pace.SLOW
    c2 = ProbeCadence()
    c2.sampled(tp(10.0, None, source="log"))  # an acceptance line with no throughput
    assert c2.pace(11.0, Phase.READY) is Pace.FAST


def test_counters_that_stall_while_requests_wait_bring_the_fast_probe_back() -> None:
    c = ProbeCadence(stall_s=5.0)
    c.sampled(tp(0.0, 300.0, running=4))
    for t in range(1, 5):
        c.sampled(tp(float(t), 0.0, running=4))
        assert c.pace(float(t), Phase.READY) is Pace.SLOW, t  # a pause between batches is no hang
    for t in range(5, 8):
        c.sampled(tp(float(t), 0.0, running=4))
    assert c.pace(7.0, Phase.READY) is Pace.FAST
    c.sampled(tp(8.0, 120.0, running=4))  # tokens flow again
    assert c.pace(8.0, Phase.READY) is Pace.SLOW


def test_counters_gone_quiet_prove_nothing() -> None:
    c = ProbeCadence(evidence_s=10.0)
    c.sampled(tp(0.0, 300.0, running=1))
    assert c.pace(9.0, Phase.READY) is Pace.SLOW
    assert c.pace(11.0, Phase.READY) is Pace.FAST  # the scrape failed or the log went silent


def test_a_change_of_unit_an_action_or_the_operator_wakes_it_for_a_while() -> None:
    c = ProbeCadence(wake_s=30.0)
    for t in range(0, 60, 2):
        c.sampled(tp(float(t), 200.0, running=2))
    c.woke(40.0)
    assert c.pace(41.0, Phase.READY) is Pace.FAST
    assert not c.take_asked()
    c.sampled(tp(71.0, 200.0, running=2))
    assert c.pace(71.0, Phase.READY) is Pace.SLOW
    c.woke(72.0, asked=True)
    assert c.take_asked() and not c.take_asked()  # asking once sends one generation ...
    assert c.pace(73.0, Phase.READY) is Pace.SLOW  # ... and only that: no /health every 2 s after it


def test_a_generation_is_due_every_slow_interval_once_ready_only() -> None:
    c = ProbeCadence(slow_s=30.0)
    assert not c.generation_due(100.0, 80.0, Phase.READY)
    assert c.generation_due(110.0, 80.0, Phase.READY)
    assert not c.generation_due(110.0, 80.0, Phase.WARMUP)


def test_counters_scraped_seldom_are_old_only_after_two_missed_scrapes() -> None:
    # a fleet's background deployment is scraped every 10 s: its counters, 10.5 s old just before the next scrape,
    # still prove it alive (else every background deployment would probe fast, /health into its log, before each
    # scrape); two scrapes missed, they prove nothing
    c = ProbeCadence(evidence_s=10.0)
    c.sampled(tp(0.0, 300.0, running=1))
    assert c.pace(10.5, Phase.READY) is Pace.FAST  # on screen, scraped every 2 s: old
    assert c.pace(10.5, Phase.READY, scrape_every_s=10.0) is Pace.SLOW
    assert c.pace(19.0, Phase.READY, scrape_every_s=10.0) is Pace.SLOW
    assert c.pace(21.0, Phase.READY, scrape_every_s=10.0) is Pace.FAST
