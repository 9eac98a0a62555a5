"""Throughput from the best source a server offers: its Prometheus /metrics page, else its own log lines.

What to read is the preset's (`Preset.metrics`: which series are which figure, how its ranks' series add up;
`Preset.log_throughput`: its log line's reader, tui/lifecycle/presets/telemetry.py); this module parses the page
the engine fetched and keeps the state across scrapes. Counters are turned into rates across scrapes (resets
on restart are detected, not turned into negative rates); gauges are read as they are. Lines are filtered by prefix
before `prometheus_client.parser` sees them, because the parser costs 20-40 us per line and a vLLM page has hundreds
of lines we do not need.

The server counts bringup's own readiness probes (real generations) like any other work. Given the prober's ledger
(tui/collectors/probes.py `ProbeTokens`), the tokens/s figure leaves them out: from a counter, the probes' tokens are
taken out of its gain, exactly; a figure the server computes per interval (SGLang's `gen_throughput` gauge, its
decode log line) cannot be split, so an interval whose only work was bringup's probes reads 0 (idle), and one with
other work reads as the server says.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tui.guard.text import split_lines
from tui.lifecycle.lines import clean
from tui.lifecycle.presets import Preset
from tui.lifecycle.presets.registry import PRESETS
from tui.lifecycle.presets.telemetry import MetricReading, MetricsSpec, Series, finite
from tui.model import ThroughputSample

if TYPE_CHECKING:
    from tui.collectors.probes import ProbeTokens

#: the sample names every registered preset reads (a page parsed without knowing its server keeps these)
WANTED = tuple(dict.fromkeys(n for p in PRESETS.values() if p.metrics is not None for n in p.metrics.keep()))

#: the TTFT shown is the mean over the requests that started in this many seconds
TTFT_WINDOW_S = 15.0
#: a log line's time is the host's (or, in SGLang's own stamp, to the second): a probe this close to it may be the
#: request it counts
LINE_SLACK_S = 1.0


def parse_metrics(text: str, wanted: tuple[str, ...] = WANTED) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of the metrics we use (`wanted`: sample names, kept by prefix), by sample name. Malformed lines are
    dropped, never raised."""
    # imported here: the package pulls in its HTTP exposition code (http.server, urllib.request), 40 ms of the
    # console's start-up, and the first scrape comes only once the server is ready
    from prometheus_client.parser import text_string_to_metric_families

    keep = [ln for ln in split_lines(text) if ln.startswith(wanted) or
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


@dataclass(frozen=True, slots=True)
class _GaugeSeen:
    """The server's own tokens/s figure as last read, and whether it was taken as real work (else bringup's probes
    alone): the same figure again is the same interval, read the same way."""

    value: float
    real: bool
    at: float


class MetricsRates:
    """Keeps the previous scrape to turn counters into rates. `preset`: the server's, whose figures are read; without
    one, a page is read as the registered preset's whose metric names it has."""

    def __init__(self, preset: Preset | None = None) -> None:
        self._spec = preset.metrics if preset is not None else None
        self._wanted = self._spec.keep() if self._spec is not None else WANTED
        self._prev: dict[str, _Counter] = {}
        #: (time, sum, count) of the TTFT histogram at each scrape of the last window, by server
        self._ttft_seen: dict[str, deque[tuple[float, float, float]]] = {}
        self._gauge: _GaugeSeen | None = None

    def _gain(self, series: Series | None, at: float, value: float | None) -> tuple[float, float] | None:
        """What the counter gained since the last scrape, and in how many seconds; None on the first scrape, or a
        reset (a restart: counted from here)."""
        if series is None or value is None:
            return None
        key = series.name
        prev = self._prev.get(key)
        self._prev[key] = _Counter(at, value)
        if prev is None or at <= prev.at or value < prev.value:
            return None
        return value - prev.value, at - prev.at

    def _rate(self, series: Series | None, at: float, value: float | None) -> float | None:
        gain = self._gain(series, at, value)
        return None if gain is None else finite(gain[0] / gain[1])

    def _decode_rate(self, series: Series | None, at: float, value: float | None, probes: ProbeTokens | None,
                     asked_at: float) -> float | None:
        """Tokens/s from the generated-tokens counter, bringup's own probes' tokens taken out."""
        gain = self._gain(series, at, value)
        if gain is None:
            if probes is not None and value is not None:
                probes.settle(asked_at)  # a first reading (or a counter started again): the base of the next
            return None
        tokens, seconds = gain
        if probes is not None:
            tokens -= probes.take(tokens, asked_at, at)
        return finite(max(0.0, tokens) / seconds)

    def _gauge_rate(self, value: float | None, r: MetricReading, at: float, probes: ProbeTokens | None,
                    asked_at: float) -> float | None:
        """The server's own tokens/s (a gauge: its last interval's figure), or 0 when that interval's only work
        can have been bringup's probes: the server runs and queues nothing but them now, and the figure is the one
        already judged so, or it changed while a probe ran and nothing else was seen (at first sight, nothing else
        is known: an idle server's figure is no current throughput)."""
        if value is None or probes is None:
            return value
        prev = self._gauge
        ours = probes.in_flight(asked_at, at)
        busy = (_int(r.running) or 0) > ours or (_int(r.queued) or 0) > 0
        if busy or value == 0:
            real = True
        elif prev is not None and prev.value == value:
            real = prev.real
        else:
            real = prev is not None and not probes.ran_between(prev.at, at)
        self._gauge = _GaugeSeen(value, real, at)
        return value if real else 0.0

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

    def sample(self, text: str, at: float, probes: ProbeTokens | None = None,
               asked_at: float | None = None) -> ThroughputSample | None:
        """The figures of one page read at `at`. `probes`: the ledger of bringup's own generations, taken out of the
        tokens/s; `asked_at`: when the page was asked for (a generation sent after it was answered, at `at`, is in
        none of its counts)."""
        m = parse_metrics(text, self._wanted)
        if not m:
            return None
        spec = self._spec if self._spec is not None else _claimed(m)
        if spec is None:
            return None
        r = spec.read(m)
        asked = at if asked_at is None else asked_at
        decode = self._decode_rate(spec.decode_tokens, at, r.decode_tokens, probes, asked)
        gauge = None if decode is not None else self._gauge_rate(r.tokens_per_s, r, at, probes, asked)
        drafts = self._rate(spec.spec_drafts, at, r.spec_drafts)
        accepted = self._rate(spec.spec_accepted, at, r.spec_accepted)
        drafted = self._rate(spec.spec_draft_tokens, at, r.spec_draft_tokens)
        # acceptance from the counters' rates when the server counts (mean length = 1 + accepted / drafts), else
        # as the server averages it
        accept_len = 1 + accepted / drafts if drafts and accepted is not None else r.accept_len
        accept_rate = accepted / drafted if drafted and accepted is not None else r.accept_rate
        return ThroughputSample(at=at, tokens_per_s=decode if decode is not None else gauge,
                                source="metrics", running=_int(r.running), queued=_int(r.queued),
                                accept_len=accept_len, accept_rate=accept_rate,
                                ttft_s=self._ttft(r, spec.ttft_histogram, at))


def _claimed(m: dict[str, list[tuple[dict[str, str], float]]]) -> MetricsSpec | None:
    """The metrics of the registered preset whose names the page has (the first, in the registry's order)."""
    return next((p.metrics for p in PRESETS.values() if p.metrics is not None and p.metrics.claims(m)), None)


def _int(x: float | None) -> int | None:
    x = finite(x)
    return None if x is None else int(x)


def from_log_line(preset: Preset, raw: str, at: float, probes: ProbeTokens | None = None) -> ThroughputSample | None:
    """A throughput sample from one of the server's periodic log lines (its preset's reader), or None.

    `probes`: the ledger of bringup's own generations. The line's figure is the server's over its interval, which
    cannot be split: a line whose running requests can all have been bringup's probes (as many probes under way
    about then, nothing queued) is an idle interval, 0 tokens/s and nothing running but bringup's own. So is a
    line that says nothing runs any more, written as the interval's last request finished, when that can have been
    a probe of bringup's: an idle server's log showed a probe's 40 tokens/s that way, in the figure `bringup
    exporter` read back from the log at its start. Without a probe about then, a line is left as it is."""
    if preset.log_throughput is None:
        return None
    return without_probes(preset.log_throughput(clean(raw).text, at), probes)


def without_probes(tp: ThroughputSample | None, probes: ProbeTokens | None) -> ThroughputSample | None:
    """A log sample as the server's own work: idle when all it ran can have been bringup's probes (`from_log_line`;
    for a parallel server, applied to the sum of its groups' lines, since a probe runs in one group only)."""
    if tp is None or probes is None or not tp.tokens_per_s or tp.queued:
        return tp
    ours = probes.in_flight(tp.at - LINE_SLACK_S, tp.at + LINE_SLACK_S)
    if ours and (tp.running or 0) <= ours:
        return replace(tp, tokens_per_s=0.0, running=0)
    return tp
