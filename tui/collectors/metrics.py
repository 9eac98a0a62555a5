"""Throughput from the best source a server offers: its Prometheus /metrics page, else its own log lines.

What to read is the preset's (`Preset.metrics`: which series are which figure, how its ranks' series add up;
`Preset.log_throughput`: its log line's reader, tui/lifecycle/presets/telemetry.py); this module parses the page
the engine fetched and keeps the state across scrapes. Counters are turned into rates across scrapes (resets
on restart are detected, not turned into negative rates); gauges are read as they are. Lines are filtered by prefix
before `prometheus_client.parser` sees them, because the parser costs 20-40 us per line and a vLLM page has hundreds
of lines we do not need.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from tui.lifecycle.lines import clean
from tui.lifecycle.presets import Preset
from tui.lifecycle.presets.registry import PRESETS
from tui.lifecycle.presets.telemetry import MetricReading, MetricsSpec, Series, finite
from tui.model import ThroughputSample

#: the sample names every registered preset reads (a page parsed without knowing its server keeps these)
WANTED = tuple(dict.fromkeys(n for p in PRESETS.values() if p.metrics is not None for n in p.metrics.keep()))

#: the TTFT shown is the mean over the requests that started in this many seconds
TTFT_WINDOW_S = 15.0


def parse_metrics(text: str, wanted: tuple[str, ...] = WANTED) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of the metrics we use (`wanted`: sample names, kept by prefix), by sample name. Malformed lines are
    dropped, never raised."""
    # imported here: the package pulls in its HTTP exposition code (http.server, urllib.request), 40 ms of the
    # console's start-up, and the first scrape comes only once the server is ready
    from prometheus_client.parser import text_string_to_metric_families

    keep = [ln for ln in text.splitlines() if ln.startswith(wanted) or
            (ln.startswith("# TYPE ") and ln[7:].startswith(wanted))]
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


@dataclass
class _Counter:
    at: float
    value: float


class MetricsRates:
    """Keeps the previous scrape to turn counters into rates. `preset`: the server's, whose figures are read; without
    one, a page is read as the registered preset's whose metric names it has."""

    def __init__(self, preset: Preset | None = None) -> None:
        self._spec = preset.metrics if preset is not None else None
        self._wanted = self._spec.keep() if self._spec is not None else WANTED
        self._prev: dict[str, _Counter] = {}
        #: (time, sum, count) of the TTFT histogram at each scrape of the last window, by server
        self._ttft_seen: dict[str, deque[tuple[float, float, float]]] = {}

    def _rate(self, series: Series | None, at: float, value: float | None) -> float | None:
        if series is None or value is None:
            return None
        key = series.name
        prev = self._prev.get(key)
        self._prev[key] = _Counter(at, value)
        if prev is None or at <= prev.at or value < prev.value:  # first scrape, or a counter reset
            return None
        return finite((value - prev.value) / (at - prev.at))

    def _ttft(self, r: MetricReading, histogram: str | None, at: float) -> float | None:
        """Mean TTFT of the requests whose first token came in the last TTFT_WINDOW_S seconds: d(sum) / d(count)
        of the histogram across that window. Between two scrapes a second apart often no request starts: a
        figure per scrape would come and go; None only when no request started in the whole window."""
        s, c = r.ttft_sum, r.ttft_count
        if histogram is None or s is None or c is None:
            return None
        seen = self._ttft_seen.setdefault(histogram, deque())
        if seen and (c < seen[-1][2] or s < seen[-1][1] or at <= seen[-1][0]):  # a reset (a restart), or a clock
            seen.clear()  # step back: count from here
        seen.append((at, s, c))
        while len(seen) > 1 and seen[1][0] <= at - TTFT_WINDOW_S:  # the base: the newest scrape a window ago
            seen.popleft()
        _, s0, c0 = seen[0]
        return finite((s - s0) / (c - c0)) if c > c0 else None

    def sample(self, text: str, at: float) -> ThroughputSample | None:
        m = parse_metrics(text, self._wanted)
        if not m:
            return None
        spec = self._spec if self._spec is not None else _claimed(m)
        if spec is None:
            return None
        r = spec.read(m)
        decode = self._rate(spec.decode_tokens, at, r.decode_tokens)
        drafts = self._rate(spec.spec_drafts, at, r.spec_drafts)
        accepted = self._rate(spec.spec_accepted, at, r.spec_accepted)
        drafted = self._rate(spec.spec_draft_tokens, at, r.spec_draft_tokens)
        # acceptance from the counters' rates when the server counts (mean length = 1 + accepted / drafts), else
        # as the server averages it
        accept_len = 1 + accepted / drafts if drafts and accepted is not None else r.accept_len
        accept_rate = accepted / drafted if drafted and accepted is not None else r.accept_rate
        return ThroughputSample(at=at, tokens_per_s=decode if decode is not None else r.tokens_per_s,
                                source="metrics", running=_int(r.running), queued=_int(r.queued),
                                accept_len=accept_len, accept_rate=accept_rate,
                                ttft_s=self._ttft(r, spec.ttft_histogram, at))


def _claimed(m: dict[str, list[tuple[dict[str, str], float]]]) -> MetricsSpec | None:
    """The metrics of the registered preset whose names the page has (the first, in the registry's order)."""
    return next((p.metrics for p in PRESETS.values() if p.metrics is not None and p.metrics.claims(m)), None)


def _int(x: float | None) -> int | None:
    x = finite(x)
    return None if x is None else int(x)


def from_log_line(preset: Preset, raw: str, at: float) -> ThroughputSample | None:
    """A throughput sample from one of the server's periodic log lines (its preset's reader), or None."""
    if preset.log_throughput is None:
        return None
    return preset.log_throughput(clean(raw).text, at)
