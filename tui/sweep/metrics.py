"""The figures of one cell, from client-side request timings and /metrics counter deltas. Pure functions.

The tools disagree on names (vLLM's TPOT is AIPerf's ITL; GuideLLM's TPOT includes the first token), so each
column is defined here once, and docs/sweeps.md repeats these words:

- ttft_ms: first non-empty streamed chunk - request sent, per successful request;
- e2el_ms: last chunk (end of stream) - request sent;
- tpot_ms: (E2EL - TTFT) / (N_out - 1) per request with N_out >= 2 output tokens (N_out from the server's usage);
- itl_ms: the gaps between consecutive content chunks, pooled over every gap of every request (under speculative
  decoding one chunk may carry several tokens, so ITL is per chunk, not per token);
- each with mean, p50, p90, p99 (linear interpolation between order statistics);
- tok_s_total: output tokens of successful requests / the cell's wall time; tok_s_user: 1 / mean TPOT;
  tok_s_gpu: tok_s_total / the deployment's GPUs; req_s: successful requests / wall time;
- goodput_rps: successful requests meeting every SLO / wall time (None without SLOs), with the SLO string;
- accept_len and accept_rate, from counter deltas over the cell, never a gauge: vLLM 1 + d(accepted) / d(drafts) and
  d(accepted) / d(draft tokens) (all three counted each step); SGLang d(generation tokens) / d(verify calls), both
  counted when a request finishes (0.5.15+), and no rate (no draft-token counter). None when the server has no such
  counters; when an SGLang speculates without a verify counter, accept_note says the figure is not available
  (tui/sweep/counters.py has what each release counts, and when).

Failed requests are counted and excluded from every latency and throughput figure.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from tui.sweep.results import CellMetrics, Stat


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One request as the client saw it: chunk arrival times in seconds after it was sent."""

    ok: bool
    chunk_s: tuple[float, ...] = ()
    #: output tokens (the server's usage, else the number of content chunks)
    output_tokens: int = 0
    #: when the stream ended (after the last chunk), seconds after it was sent
    end_s: float | None = None
    error: str = ""

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_s[0] if self.chunk_s else None

    @property
    def e2el_s(self) -> float | None:
        if self.end_s is not None:
            return self.end_s
        return self.chunk_s[-1] if self.chunk_s else None

    @property
    def tpot_s(self) -> float | None:
        t, e = self.ttft_s, self.e2el_s
        if t is None or e is None or self.output_tokens < 2:
            return None
        return (e - t) / (self.output_tokens - 1)

    @property
    def gaps_s(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.chunk_s)]


@dataclass(frozen=True, slots=True)
class SloSpec:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None
    text: str | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))

    def met_by(self, r: RequestTiming) -> bool:
        """Every SLO met; a request with one output token has no TPOT and meets a TPOT SLO (as vLLM counts it)."""
        checks = ((self.ttft_ms, r.ttft_s), (self.tpot_ms, r.tpot_s if r.output_tokens >= 2 else 0.0),
                  (self.e2el_ms, r.e2el_s))
        return all(limit is None or (v is not None and v * 1000 <= limit) for limit, v in checks)


@dataclass(frozen=True, slots=True)
class SpecCounters:
    """Speculative-decoding counters read from /metrics at one moment (None: the server has no such counter)."""

    #: vLLM, counted each step: drafts (verify steps), accepted draft tokens, proposed draft tokens
    drafts: float | None = None
    accepted: float | None = None
    draft_tokens: float | None = None
    #: SGLang, counted when a request finishes: its generated tokens, and its verify forwards
    finished_tokens: float | None = None
    verify_calls: float | None = None
    #: why the accept length cannot be had from this server's /metrics at all ("" when it can, or nothing speculates)
    unavailable: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between order statistics (numpy's default); None when empty."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def stat_ms(values_s: Sequence[float]) -> Stat:
    if not values_s:
        return Stat()
    ms = [v * 1000.0 for v in values_s]
    return Stat(mean=_r(statistics.fmean(ms)), p50=_r(percentile(ms, 50)), p90=_r(percentile(ms, 90)),
                p99=_r(percentile(ms, 99)))


def accept_from_counters(before: SpecCounters | None, after: SpecCounters | None) -> tuple[float | None, float | None]:
    """(accept length, acceptance rate) over the interval between two readings; None where a counter is missing,
    did not move, or went backwards (a restart reset it: that cell is invalid anyway)."""
    if before is None or after is None:
        return None, None

    def delta(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b < a else b - a
    if after.verify_calls is not None:  # SGLang: a counter with no series yet (no request finished) counts 0
        d_tok = delta(before.finished_tokens or 0.0, after.finished_tokens)
        d_ver = delta(before.verify_calls or 0.0, after.verify_calls)
        return _r(d_tok / d_ver, 4) if d_tok is not None and d_ver else None, None
    d_drafts = delta(before.drafts, after.drafts)
    d_acc = delta(before.accepted, after.accepted)
    d_tok = delta(before.draft_tokens, after.draft_tokens)
    length = 1 + d_acc / d_drafts if d_acc is not None and d_drafts else None
    rate = d_acc / d_tok if d_acc is not None and d_tok else None
    return _r(length, 4), _r(rate, 4)


def accept_note(after: SpecCounters | None) -> str | None:
    """Why a cell has no accept length, when the server speculates but its /metrics cannot give one."""
    return after.unavailable or None if after is not None else None


def cell_metrics(requests: Sequence[RequestTiming], duration_s: float, n_gpus: int, slo: SloSpec | None = None,
                 counters: tuple[SpecCounters | None, SpecCounters | None] = (None, None)) -> CellMetrics:
    ok = [r for r in requests if r.ok]
    ttft = [x for x in (r.ttft_s for r in ok) if x is not None]
    e2el = [x for x in (r.e2el_s for r in ok) if x is not None]
    tpot = [x for x in (r.tpot_s for r in ok) if x is not None]
    itl = [g for r in ok for g in r.gaps_s]
    out_tokens = sum(r.output_tokens for r in ok)
    dur = duration_s if duration_s > 0 else float("nan")
    total = out_tokens / dur if duration_s > 0 else 0.0
    tpot_mean = statistics.fmean(tpot) if tpot else None
    good = None
    if slo is not None and slo.any:
        good = _r(sum(1 for r in ok if slo.met_by(r)) / dur) if duration_s > 0 else 0.0
    acc_len, acc_rate = accept_from_counters(*counters)
    return CellMetrics(
        completed=len(ok), failed=len(requests) - len(ok), duration_s=_r(duration_s, 3) or 0.0,
        ttft_ms=stat_ms(ttft), tpot_ms=stat_ms(tpot), itl_ms=stat_ms(itl), e2el_ms=stat_ms(e2el),
        tok_s_total=_r(total) or 0.0, tok_s_user=_r(1.0 / tpot_mean) if tpot_mean else None,
        tok_s_gpu=_r(total / n_gpus) if n_gpus > 0 else None,
        req_s=(_r(len(ok) / dur) or 0.0) if duration_s > 0 else 0.0, goodput_rps=good,
        slo=slo.text if slo is not None and slo.any else None, accept_len=acc_len, accept_rate=acc_rate,
        accept_note=accept_note(counters[1]) if acc_len is None else None)


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)
