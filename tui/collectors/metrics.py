"""Throughput from the best source a server offers: its Prometheus /metrics page, else its own log lines.

Counters are turned into rates across scrapes (resets on restart are detected, not turned into negative
rates); gauges are read as they are. Lines are filtered by prefix before `prometheus_client.parser` sees them,
because the parser costs 20-40 us per line and a vLLM page has hundreds of lines we do not need.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict, deque
from dataclasses import dataclass

from tui.lifecycle.lines import clean
from tui.lifecycle.presets import Preset
from tui.model import ThroughputSample

WANTED = (
    "sglang:gen_throughput", "sglang:realtime_tokens_total", "sglang:num_running_reqs", "sglang:num_queue_reqs",
    "sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:generation_tokens_total",
    "sglang:spec_verify_calls_total",
    "vllm:generation_tokens_total", "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "sglang:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_count",
    "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count",
)

#: the TTFT shown is the mean over the requests that started in this many seconds
TTFT_WINDOW_S = 15.0


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of the metrics we use, by sample name. Malformed lines are dropped, never raised."""
    # imported here: the package pulls in its HTTP exposition code (http.server, urllib.request), 40 ms of the
    # console's start-up, and the first scrape comes only once the server is ready
    from prometheus_client.parser import text_string_to_metric_families

    keep = [ln for ln in text.splitlines() if ln.startswith(WANTED) or
            (ln.startswith("# TYPE ") and ln[7:].startswith(WANTED))]
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    try:
        families = list(text_string_to_metric_families("\n".join(keep) + "\n"))
    except (ValueError, TypeError, IndexError, OverflowError):
        families = []
        for ln in keep:  # one bad line must not hide the good ones
            try:
                families.extend(text_string_to_metric_families(ln + "\n"))
            except (ValueError, TypeError, IndexError, OverflowError):
                continue
    for fam in families:
        for s in fam.samples:
            try:
                out[s.name].append((dict(s.labels), float(s.value)))
            except (OverflowError, ValueError, TypeError):
                continue
    return dict(out)


def _sum(samples: dict[str, list[tuple[dict[str, str], float]]], name: str,
         where: dict[str, str] | None = None, rank0: bool = False) -> float | None:
    vals = [v for labels, v in samples.get(name, [])
            if (not where or all(labels.get(k) == w for k, w in where.items()))
            and (not rank0 or labels.get("tp_rank", "0") == "0")
            and math.isfinite(v)]
    return _finite(sum(vals)) if vals else None


@dataclass
class _Counter:
    at: float
    value: float


class MetricsRates:
    """Keeps the previous scrape to turn counters into rates."""

    def __init__(self) -> None:
        self._prev: dict[str, _Counter] = {}
        #: (time, sum, count) of the TTFT histogram at each scrape of the last window, by server
        self._ttft_seen: dict[str, deque[tuple[float, float, float]]] = {}

    def _rate(self, key: str, at: float, value: float | None) -> float | None:
        if value is None:
            return None
        prev = self._prev.get(key)
        self._prev[key] = _Counter(at, value)
        if prev is None or at <= prev.at or value < prev.value:  # first scrape, or a counter reset
            return None
        return _finite((value - prev.value) / (at - prev.at))

    def _ttft(self, m: dict[str, list[tuple[dict[str, str], float]]], prefix: str, at: float) -> float | None:
        """Mean TTFT of the requests whose first token came in the last TTFT_WINDOW_S seconds: d(sum) / d(count)
        of the histogram across that window. Between two scrapes a second apart often no request starts: a
        figure per scrape would come and go; None only when no request started in the whole window."""
        s = _sum(m, f"{prefix}:time_to_first_token_seconds_sum")
        c = _sum(m, f"{prefix}:time_to_first_token_seconds_count")
        if s is None or c is None:
            return None
        seen = self._ttft_seen.setdefault(prefix, deque())
        if seen and (c < seen[-1][2] or s < seen[-1][1] or at <= seen[-1][0]):  # a reset (a restart), or a clock
            seen.clear()  # step back: count from here
        seen.append((at, s, c))
        while len(seen) > 1 and seen[1][0] <= at - TTFT_WINDOW_S:  # the base: the newest scrape a window ago
            seen.popleft()
        _, s0, c0 = seen[0]
        return _finite((s - s0) / (c - c0)) if c > c0 else None

    def sample(self, text: str, at: float) -> ThroughputSample | None:
        m = parse_metrics(text)
        if not m:
            return None
        if any(k.startswith("sglang:") for k in m):
            decode = self._rate("sglang_decode", at, _sum(m, "sglang:realtime_tokens_total",
                                                           {"mode": "decode"}, rank0=True))
            gauge = _sum(m, "sglang:gen_throughput", rank0=True)
            tps = decode if decode is not None else gauge
            return ThroughputSample(
                at=at, tokens_per_s=tps, source="metrics",
                running=_int(_sum(m, "sglang:num_running_reqs", rank0=True)),
                queued=_int(_sum(m, "sglang:num_queue_reqs", rank0=True)),
                accept_len=_first(m, "sglang:spec_accept_length"),
                accept_rate=_first(m, "sglang:spec_accept_rate"), ttft_s=self._ttft(m, "sglang", at))
        tps = self._rate("vllm_gen", at, _sum(m, "vllm:generation_tokens_total"))
        drafts = self._rate("vllm_drafts", at, _sum(m, "vllm:spec_decode_num_drafts_total"))
        accepted = self._rate("vllm_acc", at, _sum(m, "vllm:spec_decode_num_accepted_tokens_total"))
        drafted = self._rate("vllm_drafted", at, _sum(m, "vllm:spec_decode_num_draft_tokens_total"))
        accept_len = 1 + accepted / drafts if drafts and accepted is not None else None
        accept_rate = accepted / drafted if drafted and accepted is not None else None
        return ThroughputSample(at=at, tokens_per_s=tps, source="metrics",
                                running=_int(_sum(m, "vllm:num_requests_running")),
                                queued=_int(_sum(m, "vllm:num_requests_waiting")),
                                accept_len=accept_len, accept_rate=accept_rate, ttft_s=self._ttft(m, "vllm", at))


def _first(m: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float | None:
    vals = [v for labels, v in m.get(name, []) if labels.get("tp_rank", "0") == "0" and math.isfinite(v)]
    return vals[0] if vals else None


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _int(x: float | None) -> int | None:
    x = _finite(x)
    return None if x is None else int(x)


_KV = re.compile(r"(#?[\w .()/-]+?):\s*([-\d.]+|True|False)")
_VLLM_SPEC = re.compile(r"Mean acceptance length: (?P<len>[\d.]+)")
_VLLM_RUN = re.compile(r"Running: (?P<r>\d+) reqs, Waiting: (?P<w>\d+) reqs")


def from_log_line(preset: Preset, raw: str, at: float) -> ThroughputSample | None:
    """A throughput sample from one of the server's periodic log lines, or None."""
    text = clean(raw).text
    if preset.throughput_line is None:
        return None
    m = preset.throughput_line.search(text)
    if preset.name == "sglang":
        if not m:
            return None
        kv = {k.strip(): v for k, v in _KV.findall(m["rest"])}
        return ThroughputSample(
            at=at, tokens_per_s=_f(kv.get("gen throughput (token/s)")), source="log",
            running=_i(kv.get("#running-req")), queued=_i(kv.get("#queue-req")),
            accept_len=_f(kv.get("accept len")), accept_rate=_f(kv.get("accept rate")))
    if m:
        r = _VLLM_RUN.search(text)
        return ThroughputSample(at=at, tokens_per_s=_f(m["tps"]), source="log",
                                running=_i(r["r"]) if r else None, queued=_i(r["w"]) if r else None)
    s = _VLLM_SPEC.search(text)
    if s:
        return ThroughputSample(at=at, tokens_per_s=None, source="log", accept_len=_f(s["len"]))
    return None


def _f(v: str | None) -> float | None:
    try:
        return _finite(float(v)) if v is not None else None
    except ValueError:
        return None


def _i(v: str | None) -> int | None:
    x = _f(v)
    return None if x is None else int(x)
