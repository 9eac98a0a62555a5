"""The log fallback for throughput (tui/engine/throughput.py, tui/lifecycle/presets/telemetry.py `LogGroups`) over a
parallel server: with /metrics off every data-parallel group (SGLang) or engine (vLLM) logs its own figures, and
the server's are the sum of each group's newest line, idle groups aged out. Lines are rendered from the released
wheels' own format strings (SGLang 0.5.23, vLLM 0.34), and read from a real log of eight DP groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.engine.throughput import ThroughputTracker
from tui.lifecycle.presets import get_preset
from tui.model import LogLine

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
SGLANG = get_preset("sglang")
VLLM = get_preset("vllm")


def sglang_decode(dp: int | None, tp: int, running: int, tps: float, queued: int = 0, pp: int | None = None,
                  stamp: str = "2026-05-31 18:31:21") -> str:
    """A `Decode batch` line as SGLang 0.5.23 writes it: `configure_logger`'s `[%(asctime)s{prefix}] %(message)s`
    with `configure_scheduler_process`'s prefix (` DP{dp}`, ` PP{pp}`, ` TP{tp}`), and `report_decode_stats`' message
    (`managers/scheduler_components/metrics_reporter.py`)."""
    prefix = (f" DP{dp}" if dp is not None else "") + (f" PP{pp}" if pp is not None else "") + f" TP{tp}"
    msg = (f"Decode batch, #running-req: {running}, #token: {running * 900}, token usage: {0.13:.2f}, "
           f"cuda graph: {True}, gen throughput (token/s): {tps:.2f}, #queue-req: {queued}")
    return f"[{stamp}{prefix}] {msg}"


def vllm_engine(engine: int, tps: float, running: int, waiting: int) -> str:
    """vLLM 0.34's `LoggingStatLogger.log` line for one engine of a data-parallel server (`Engine %03d: `)."""
    msg = (f"Engine {engine:03d}: Avg prompt throughput: {0.0:.1f} tokens/s, Avg generation throughput: {tps:.1f} "
           f"tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: 12.5%, "
           "Prefix cache hit rate: 0.0%")
    return f"(APIServer pid=1) INFO 05-31 18:31:21 [loggers.py:236] {msg}"


def _shown(tracker: ThroughputTracker, *batches: list[tuple[float, str]]):
    """Feed each batch of (time, line) as the engine does (`log_samples`, recorded), and return the sample shown."""
    for batch in batches:
        for tp in tracker.log_samples([LogLine(at, text) for at, text in batch]):
            tracker.record(tp, merge=True)
    return tracker.latest


def test_dp_attention_groups_are_summed() -> None:
    # dp=4 over tp=8: each group's attention-TP rank 0 logs (global TP 0, 2, 4, 6)
    lines = [(10.0 + dp * 0.1, sglang_decode(dp, dp * 2, running=8 + dp, tps=100.0 * (dp + 1), queued=dp))
             for dp in range(4)]
    tp = _shown(ThroughputTracker(SGLANG), lines)
    assert tp is not None
    assert tp.tokens_per_s == pytest.approx(1000.0), "100 + 200 + 300 + 400: every group's tokens, not the newest's"
    assert tp.running == 8 + 9 + 10 + 11
    assert tp.queued == 0 + 1 + 2 + 3


def test_a_group_counts_its_newest_line_once_across_batches() -> None:
    t = ThroughputTracker(SGLANG)
    _shown(t, [(1.0, sglang_decode(0, 0, 4, 400.0)), (1.1, sglang_decode(1, 1, 4, 300.0))])
    tp = _shown(t, [(2.0, sglang_decode(0, 0, 2, 200.0))])  # group 0 again, group 1 not in this batch
    assert tp is not None
    assert tp.tokens_per_s == pytest.approx(500.0)
    assert tp.running == 6


def test_pipeline_stages_of_one_group_count_once() -> None:
    # every PP stage of a DP group may log the same batch: the group is its DP rank
    lines = [(1.0, sglang_decode(0, 0, 8, 250.0, pp=0)), (1.0, sglang_decode(0, 0, 8, 250.0, pp=1)),
             (1.0, sglang_decode(1, 1, 8, 250.0, pp=0)), (1.0, sglang_decode(1, 1, 8, 250.0, pp=1))]
    tp = _shown(ThroughputTracker(SGLANG), lines)
    assert tp is not None
    assert tp.tokens_per_s == pytest.approx(500.0)
    assert tp.running == 16


def test_an_idle_group_is_aged_out() -> None:
    t = ThroughputTracker(SGLANG)
    stale = SGLANG.log_throughput.stale_s  # type: ignore[union-attr]
    _shown(t, [(0.0, sglang_decode(0, 0, 8, 800.0)), (0.0, sglang_decode(1, 1, 8, 800.0))])
    # group 1 has no batch any more (it logs nothing); group 0 goes on
    tp = _shown(t, [(stale + 1.0, sglang_decode(0, 0, 8, 790.0))])
    assert tp is not None
    assert tp.tokens_per_s == pytest.approx(790.0)
    assert tp.running == 8


def test_a_server_without_data_parallelism_is_one_group() -> None:
    t = ThroughputTracker(SGLANG)
    tp = _shown(t, [(1.0, sglang_decode(None, 0, 8, 800.0)), (2.0, sglang_decode(None, 0, 6, 600.0))])
    assert tp is not None
    assert tp.tokens_per_s == pytest.approx(600.0), "the newest line of the one group, not a sum over time"
    assert tp.running == 6


def test_vllm_engines_are_summed() -> None:
    lines = [(1.0, vllm_engine(0, 1500.0, 60, 2)), (1.0, vllm_engine(1, 1400.0, 58, 1))]
    tp = _shown(ThroughputTracker(VLLM), lines)
    assert tp is not None
    assert tp.tokens_per_s == pytest.approx(2900.0)
    assert (tp.running, tp.queued) == (118, 3)


def test_real_dp_attention_log() -> None:
    """sgl-project/sglang#6081: five of eight DP groups' lines within four seconds, each its own batch."""
    text = (FIX / "sglang_dp8_attention_decode_groups.log").read_text(encoding="utf-8")
    lines = [(float(i), x) for i, x in enumerate(text.split("\n")) if x and not x.startswith("#")]
    tp = _shown(ThroughputTracker(SGLANG), lines)
    assert tp is not None
    assert tp.tokens_per_s == pytest.approx(171.01 + 168.28 + 173.06 + 155.80 + 152.08)
    assert tp.running == 40
    assert tp.queued == 0
    assert tp.accept_len == pytest.approx((2.90 + 2.86 + 2.94 + 2.65 + 2.58) / 5)
