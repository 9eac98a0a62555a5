"""bringup's own probe generations are no throughput (the ledger of its probe tokens, tui/collectors): a counter
gain of only probe tokens is zero tokens/s, real load counted without them exactly, a probe under way at a reading
taken out once, a generation another bringup sent on the same server (the shared file) taken out too, the gauge and
the decode line of a server only probed read as idle. Against the simulated server: tests/e2e/
test_probe_not_throughput.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.reducer_events import DECODE_LINE_OF, SGLANG
from tui.collectors import shared_generations
from tui.collectors.metrics import MetricsRates, from_log_line
from tui.collectors.probes import ProbeTokens
from tui.engine.cadence import Pace, ProbeCadence
from tui.model import Phase

_L = 'model_name="m",engine_type="unified",pp_rank="0",moe_ep_rank="0",tp_rank="0"'


def page(decode: float | None, *, gauge: float = 0.0, running: int = 0, queued: int = 0) -> str:
    lines = [f"sglang:gen_throughput{{{_L}}} {gauge}", f"sglang:num_running_reqs{{{_L}}} {running}",
             f"sglang:num_queue_reqs{{{_L}}} {queued}"]
    if decode is not None:
        lines += ["# TYPE sglang:realtime_tokens_total counter", f'sglang:realtime_tokens_total{{{_L},mode="decode"}} '
                                                                   f"{decode}"]
    return "\n".join(lines) + "\n"


def probe(ledger: ProbeTokens, began: float, ended: float, tokens: int, asked: int = 16) -> None:
    ledger.ended(ledger.began(began, asked), ended, tokens)


def test_a_counter_gain_of_only_probe_tokens_is_zero_tokens_per_second() -> None:
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    r.sample(page(1000.0), 100.0, ledger, 100.0)
    probe(ledger, 100.2, 100.5, 16)
    s = r.sample(page(1016.0), 101.0, ledger, 101.0)
    assert s is not None and s.tokens_per_s == 0.0
    # nothing ran since: still nothing, and the probe's tokens are not taken twice
    s = r.sample(page(1016.0), 102.0, ledger, 102.0)
    assert s is not None and s.tokens_per_s == 0.0


def test_real_load_is_counted_without_the_probe_tokens_exactly() -> None:
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    r.sample(page(1000.0, running=2), 100.0, ledger, 100.0)
    probe(ledger, 100.3, 100.6, 16)
    s = r.sample(page(1216.0, running=2), 102.0, ledger, 102.0)  # 200 of load + the probe's 16, over 2 s
    assert s is not None and s.tokens_per_s == pytest.approx(100.0)


def test_a_probe_under_way_at_a_reading_is_taken_out_once_over_the_two_intervals() -> None:
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    r.sample(page(1000.0), 100.0, ledger, 100.0)
    g = ledger.began(100.8, 16)
    s = r.sample(page(1008.0), 101.0, ledger, 101.0)  # half of it counted when the page was read
    assert s is not None and s.tokens_per_s == 0.0
    ledger.ended(g, 101.2, 16)
    s = r.sample(page(1108.0), 102.0, ledger, 102.0)  # the other half, and 92 of real work
    assert s is not None and s.tokens_per_s == pytest.approx(92.0)


def test_a_probe_sent_while_a_reading_is_on_its_way_is_no_throughput_in_it_nor_in_the_next() -> None:
    """The engine sends its probe and its scrape on the same instants of its clock grid: a generation sent a moment
    after the page was asked for can be counted, in part, by the time the server answers. An idle server showed
    31.84 tok/s in the exporter for that moment (found in the suite once the two shared the grid)."""
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    r.sample(page(1000.0), 100.0, ledger, 100.0)
    g = ledger.began(101.0005, 16)  # just after the page was asked for at 101.0
    s = r.sample(page(1008.0), 101.02, ledger, 101.0)  # answered at 101.02 with half of the probe's tokens
    assert s is not None and s.tokens_per_s == 0.0
    ledger.ended(g, 101.3, 16)
    s = r.sample(page(1108.0), 102.02, ledger, 102.0)  # the other half, and 92 of real work
    assert s is not None and s.tokens_per_s == pytest.approx(92.0)
    s = r.sample(page(1108.0), 103.02, ledger, 103.0)  # nothing since: nothing, the probe not taken twice
    assert s is not None and s.tokens_per_s == 0.0


def test_a_probe_before_the_first_reading_is_in_its_base_and_not_taken_from_later_load() -> None:
    # `status`: its own probe, then two readings a second apart
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    probe(ledger, 99.0, 99.5, 16)
    r.sample(page(1016.0, running=2), 100.0, ledger, 100.0)
    s = r.sample(page(1146.0, running=2), 101.0, ledger, 101.0)
    assert s is not None and s.tokens_per_s == pytest.approx(130.0)


def test_without_a_ledger_the_figures_are_the_servers() -> None:
    r = MetricsRates(SGLANG)
    r.sample(page(1000.0), 100.0)
    s = r.sample(page(1016.0), 101.0)
    assert s is not None and s.tokens_per_s == pytest.approx(16.0)


def test_the_gauge_of_an_idle_server_at_first_sight_is_idle() -> None:
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    probe(ledger, 99.0, 99.2, 16)
    s = r.sample(page(None, gauge=16.0), 100.0, ledger, 100.0)  # the probe's own interval, as SGLang figures it
    assert s is not None and s.tokens_per_s == 0.0


def test_the_gauge_of_a_busy_server_is_the_servers_figure() -> None:
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    s = r.sample(page(None, gauge=1635.0, running=32), 100.0, ledger, 100.0)
    assert s is not None and s.tokens_per_s == pytest.approx(1635.0)
    # the load ends: the same figure is the same interval, read the same way
    s = r.sample(page(None, gauge=1635.0), 101.0, ledger, 101.0)
    assert s is not None and s.tokens_per_s == pytest.approx(1635.0)
    # a new interval closed while only a probe ran: idle
    probe(ledger, 101.2, 101.4, 16)
    s = r.sample(page(None, gauge=16.0), 102.0, ledger, 102.0)
    assert s is not None and s.tokens_per_s == 0.0
    s = r.sample(page(None, gauge=16.0), 103.0, ledger, 103.0)
    assert s is not None and s.tokens_per_s == 0.0
    # a new interval with no probe in it: real work, however short
    s = r.sample(page(None, gauge=40.0), 104.0, ledger, 104.0)
    assert s is not None and s.tokens_per_s == pytest.approx(40.0)


def test_the_gauge_while_only_a_probe_runs_is_idle() -> None:
    ledger, r = ProbeTokens(), MetricsRates(SGLANG)
    r.sample(page(None, gauge=0.0), 100.0, ledger, 100.0)
    g = ledger.began(100.5, 16)
    s = r.sample(page(None, gauge=16.0, running=1), 101.0, ledger, 101.0)
    assert s is not None and s.tokens_per_s == 0.0
    ledger.ended(g, 101.1, 16)


def test_a_decode_line_whose_only_request_is_the_probe_is_idle() -> None:
    ledger = ProbeTokens()
    probe(ledger, 100.0, 100.3, 4, asked=4)
    s = from_log_line(SGLANG, DECODE_LINE_OF.format(n=1, q=0), 100.2, ledger)
    assert s is not None and s.tokens_per_s == 0.0 and s.running == 0  # nothing but bringup's own
    # and the probe's pace takes it as the server's word that it is idle, as it takes /metrics' gauges
    cadence = ProbeCadence(slow_s=30.0)
    cadence.sampled(s)
    assert cadence.pace(101.0, Phase.READY) is Pace.SLOW


def test_a_decode_line_written_as_the_probe_finished_is_idle_and_one_with_no_probe_about_keeps_its_figure() -> None:
    """A line with nothing running any more (the interval's last request finished in its step), read back from the
    log at `bringup exporter`'s start: the probe's own 40 tokens/s was its figure until the first scrape."""
    ledger = ProbeTokens()
    probe(ledger, 100.0, 100.3, 16)
    s = from_log_line(SGLANG, DECODE_LINE_OF.format(n=0, q=0), 100.3, ledger)
    assert s is not None and s.tokens_per_s == 0.0
    s = from_log_line(SGLANG, DECODE_LINE_OF.format(n=0, q=0), 130.0, ledger)  # no probe about then: someone's work
    assert s is not None and s.tokens_per_s == pytest.approx(0.13)


@pytest.mark.parametrize(("n", "q", "at"), [(2, 0, 100.2), (1, 1, 100.2), (1, 0, 130.0)])
def test_a_decode_line_with_other_work_keeps_its_figure(n: int, q: int, at: float) -> None:
    ledger = ProbeTokens()
    probe(ledger, 100.0, 100.3, 4, asked=4)
    s = from_log_line(SGLANG, DECODE_LINE_OF.format(n=n, q=q), at, ledger)
    assert s is not None and s.tokens_per_s == pytest.approx(0.13)


def test_a_generation_another_bringup_sent_is_no_throughput_here(tmp_path: Path) -> None:
    # `bringup restart` proved the new run with a generation, then exited; an exporter started after it reads the
    # server's log back: the decode line of that generation is bringup's own, not the server's work
    shared = tmp_path / "generations"
    restart, exporter = ProbeTokens(shared), ProbeTokens(shared)
    probe(restart, 100.0, 100.3, 4, asked=4)
    s = from_log_line(SGLANG, DECODE_LINE_OF.format(n=1, q=0), 100.2, exporter)
    assert s is not None and s.tokens_per_s == 0.0 and s.running == 0
    # with another request beside it, the line is the server's
    s = from_log_line(SGLANG, DECODE_LINE_OF.format(n=2, q=0), 100.2, exporter)
    assert s is not None and s.tokens_per_s == pytest.approx(0.13)
    # and never twice in the ledger that wrote it
    assert restart.in_flight(100.0, 100.3) == 1


def test_another_bringups_generation_after_this_ones_first_reading_is_taken_out_of_the_counter(tmp_path: Path) -> None:
    shared = tmp_path / "generations"
    console, status = ProbeTokens(shared), ProbeTokens(shared)
    r = MetricsRates(SGLANG)
    probe(status, 98.0, 98.5, 16)  # before the console's first reading: in its base already
    r.sample(page(1016.0), 100.0, console, 100.0)
    probe(status, 100.2, 100.5, 16)  # between its readings: bringup's own
    s = r.sample(page(1032.0), 101.0, console, 101.0)
    assert s is not None and s.tokens_per_s == 0.0
    s = r.sample(page(1132.0), 102.0, console, 102.0)  # 100 of real work
    assert s is not None and s.tokens_per_s == pytest.approx(100.0)


def test_the_shared_file_survives_garbage_a_torn_line_and_a_rewrite(tmp_path: Path) -> None:
    shared = tmp_path / "generations"
    writer, reader = ProbeTokens(shared), ProbeTokens(shared)
    shared.write_bytes(b"\xff\xfe not a line\n1 2\nx 5.0 4.0 3\n")  # unreadable, short, ended before it began
    probe(writer, 100.0, 100.3, 4)
    with open(shared, "a") as f:
        f.write("someone 200.0 20")  # a line still being written
    assert reader.in_flight(99.0, 101.0) == 1
    assert reader.in_flight(199.0, 201.0) == 0
    with open(shared, "a") as f:
        f.write("0.5 7\n")  # now whole
    assert reader.in_flight(199.0, 201.0) == 1
    # a writer past the size bound keeps the last two minutes; a reader reads the new file, nothing twice
    shared_generations.MAX_BYTES, was = 200, shared_generations.MAX_BYTES
    try:
        for i in range(8):
            probe(writer, 300.0 + i, 300.2 + i, 4)
    finally:
        shared_generations.MAX_BYTES = was
    assert shared.stat().st_size < 400
    assert reader.in_flight(299.0, 310.0) == 8  # each once, though the rewritten file was read again
    assert reader.in_flight(99.0, 101.0) == 0  # past KEEP_S, forgotten as a ledger forgets its own


def test_a_shared_file_that_cannot_be_written_leaves_the_ledger_its_own(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    ledger = ProbeTokens(blocked / "generations")  # its folder is a file: nothing can be written there
    probe(ledger, 100.0, 100.3, 4)
    assert ledger.in_flight(100.0, 100.3) == 1
