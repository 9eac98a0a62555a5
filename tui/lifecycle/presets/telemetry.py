"""What a server says about its own work, as its preset describes it: which series of its Prometheus /metrics page
are which figure and how the series of its ranks add up, the reader of its periodic throughput log line, the flag
that sizes its GPU memory, how its metrics are turned on and how its log is told from another server's.

Pure: parsed samples and lines in, figures out. The collector (tui/collectors/metrics.py) parses the page the engine
fetched and turns counters into rates across scrapes; the GPU panel is handed the budget the server's argv gives.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tui.model import ThroughputSample

__all__ = [
    "LogGroups", "LogThroughput", "MemoryBudget", "MetricReading", "MetricsHint", "MetricsSpec", "RankRule", "Samples",
    "Series", "finite", "to_float", "to_int",
]

#: a parsed /metrics page: samples by sample name, each (labels, value)
Samples = Mapping[str, Sequence[tuple[Mapping[str, str], float]]]


class LogThroughput(Protocol):
    """The reader of a server's periodic throughput log lines.

    A parallel server logs one line per group of its ranks that runs its own batch (SGLang: each data-parallel
    attention group's rank 0; vLLM: each engine), each line that group's figures only: the server's are the sum of
    each group's newest line, so a reader also says which group wrote a line, and how long a group's line stands
    for it (a group that has gone idle logs nothing more)."""

    @property
    def stale_s(self) -> float:
        """A group whose newest line is this much older than the newest line of any group is idle (or gone)."""
        ...

    def __call__(self, text: str, at: float) -> ThroughputSample | None:
        """A line (cleaned of its wrappers) and its time -> the group's sample, or None (not a throughput line)."""
        ...

    def group(self, text: str, ranks: str) -> str:
        """The group that wrote the line (`ranks`: the rank tags of the line's prefix, tui/lifecycle/lines.py
        `CleanLine.ranks`); "" for the whole server."""
        ...


#: the most groups kept (a server with more data-parallel groups than this is counted by its newest ones)
MAX_GROUPS = 1024


class LogGroups:
    """The server's throughput from its groups' log lines: each group's newest sample, summed (tokens/s, running
    and queued requests) or averaged (acceptance) over the groups still logging. A group is aged out once its newest
    line is `stale_s` older than the newest of any group: a DP group with no request logs nothing, and its last busy
    line would otherwise be counted for ever. No clock: times are the lines' own."""

    def __init__(self, stale_s: float, limit: int = MAX_GROUPS) -> None:
        self.stale_s = stale_s
        self.limit = limit
        self._newest: dict[str, ThroughputSample] = {}

    def add(self, group: str, tp: ThroughputSample) -> None:
        old = self._newest.get(group)
        if old is not None and old.at > tp.at:
            return  # a line older than the group's newest (a log read back after its followed lines)
        self._newest.pop(group, None)
        self._newest[group] = tp  # newest last: the oldest goes first when the bound is reached
        if len(self._newest) > self.limit:
            del self._newest[next(iter(self._newest))]

    def total(self) -> ThroughputSample | None:
        """The server's sample: the groups' figures at the newest line's time (None before any line)."""
        if not self._newest:
            return None
        newest = max(tp.at for tp in self._newest.values())
        for g in [g for g, tp in self._newest.items() if tp.at < newest - self.stale_s]:
            del self._newest[g]
        live = list(self._newest.values())
        return ThroughputSample(
            at=newest, source=live[0].source, tokens_per_s=_sum(tp.tokens_per_s for tp in live),
            running=_isum(tp.running for tp in live), queued=_isum(tp.queued for tp in live),
            accept_len=_mean(tp.accept_len for tp in live), accept_rate=_mean(tp.accept_rate for tp in live))

    def __len__(self) -> int:
        return len(self._newest)


def _sum(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return finite(sum(vals)) if vals else None


def _isum(xs: Iterable[int | None]) -> int | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) if vals else None


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return finite(sum(vals) / len(vals)) if vals else None


def finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def to_float(v: str | None) -> float | None:
    """A number a log line wrote, or None (missing, garbled, or not finite: a 400-digit count is inf)."""
    try:
        return finite(float(v)) if v is not None else None
    except ValueError:
        return None


def to_int(v: str | None) -> int | None:
    x = to_float(v)
    return None if x is None else int(x)


@dataclass(frozen=True, slots=True)
class Series:
    """One figure's samples on a page: a sample name, and label values a sample must carry. A label asked to be ""
    also matches a sample without it (SGLang's `priority=""` is the total, `priority="3"` one priority's part)."""

    name: str
    where: tuple[tuple[str, str], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k, "") == v for k, v in self.where)


@dataclass(frozen=True, slots=True)
class RankRule:
    """How the series of one figure add up over a server's ranks.

    Series whose labels differ only in `rank_labels` are one group's figure, exported by several ranks of that group
    (the same count, each rank running the same batch): one of them is taken, the lowest rank's. Series that differ
    in any other label are other work and are summed: a data-parallel group (SGLang's `dp_rank`), an engine (vLLM's
    `engine`), a mode. With no rank labels every series is summed.
    """

    rank_labels: tuple[str, ...] = ()

    def per_group(self, samples: Samples, series: Series) -> list[float]:
        """Each group's value of the figure (finite values only)."""
        best: dict[tuple[tuple[str, str], ...], tuple[tuple[int, ...], float]] = {}
        for labels, v in samples.get(series.name, ()):
            if finite(v) is None or not series.matches(labels):
                continue
            group = tuple(sorted((k, w) for k, w in labels.items() if k not in self.rank_labels))
            rank = tuple(_rank(labels.get(k)) for k in self.rank_labels)
            if group not in best or rank < best[group][0]:
                best[group] = (rank, v)
        return [v for _, v in best.values()]

    def total(self, samples: Samples, series: Series | None) -> float | None:
        """The figure of the whole server: the sum over groups (None when no group has it, or it overflows)."""
        vals = self.per_group(samples, series) if series is not None else []
        return finite(sum(vals)) if vals else None

    def mean(self, samples: Samples, series: Series | None) -> float | None:
        """A per-group average (an acceptance length): the mean over groups."""
        vals = self.per_group(samples, series) if series is not None else []
        return finite(sum(vals) / len(vals)) if vals else None


def _rank(v: str | None) -> int:
    if v is None:
        return 0  # a series without the label is its group's only one
    return int(v) if v.isdigit() and len(v) < 10 else 1 << 31


@dataclass(frozen=True, slots=True)
class MetricReading:
    """One /metrics page's figures before rates: counters as totals (the collector turns them into rates across
    scrapes), gauges as they are. None: not on the page."""

    #: tokens generated so far (a counter): its rate is tokens/s
    decode_tokens: float | None = None
    #: the server's own tokens/s (a gauge), shown when the counter gives no rate
    tokens_per_s: float | None = None
    running: float | None = None
    queued: float | None = None
    #: speculative decoding's acceptance as the server averages it (gauges)
    accept_len: float | None = None
    accept_rate: float | None = None
    #: or as counters whose rates give it: drafts (verify steps), accepted draft tokens, proposed draft tokens
    spec_drafts: float | None = None
    spec_accepted: float | None = None
    spec_draft_tokens: float | None = None
    #: the time-to-first-token histogram's sum and count, summed over the page
    ttft_sum: float | None = None
    ttft_count: float | None = None


@dataclass(frozen=True, slots=True)
class MetricsSpec:
    """Which series of a server's /metrics page are its figures, and how its ranks' series add up (`ranks`).

    Counters (`decode_tokens`, the `spec_*` ones) are read as totals, for the collector to turn into rates; gauges as
    they are. The collector keeps only the lines of `keep()` before parsing a page (a vLLM page has hundreds).
    """

    #: generated tokens, a counter
    decode_tokens: Series | None = None
    #: the server's own tokens/s, a gauge: the figure until the counter gives a rate (or when there is no counter)
    tokens_per_s: Series | None = None
    running: Series | None = None
    queued: Series | None = None
    #: acceptance as gauges the server averages itself (SGLang) ...
    accept_len: Series | None = None
    accept_rate: Series | None = None
    #: ... or as counters (vLLM): length = 1 + accepted / drafts, rate = accepted / drafted, over the same interval
    spec_drafts: Series | None = None
    spec_accepted: Series | None = None
    spec_draft_tokens: Series | None = None
    #: the time-to-first-token histogram's name: its `_sum` and `_count` give the mean TTFT over a window
    ttft_histogram: str | None = None
    ranks: RankRule = field(default_factory=RankRule)
    #: further names kept for other readers of the page (the sweep's counters, tui/sweep/counters.py)
    also_keep: tuple[str, ...] = ()

    def series(self) -> tuple[Series, ...]:
        return tuple(s for s in (self.decode_tokens, self.tokens_per_s, self.running, self.queued, self.accept_len,
                                 self.accept_rate, self.spec_drafts, self.spec_accepted, self.spec_draft_tokens)
                     if s is not None)

    def keep(self) -> tuple[str, ...]:
        """The sample names to keep from a page (a line is kept when it starts with one of them)."""
        names = [s.name for s in self.series()]
        if self.ttft_histogram:
            names += [self.ttft_histogram + "_sum", self.ttft_histogram + "_count"]
        return tuple(dict.fromkeys([*names, *self.also_keep]))

    def reads(self) -> dict[str, tuple[str, ...]]:
        """Every metric read (by its sample or family name), with the labels its samples are filtered or grouped by
        (the conformance tests hold each to the releases' own definitions)."""
        out = {s.name: (*(k for k, _ in s.where), *self.ranks.rank_labels) for s in self.series()}
        if self.ttft_histogram:
            out[self.ttft_histogram] = ()
        return out | {n: () for n in self.also_keep}

    def claims(self, samples: Samples) -> bool:
        """Whether a parsed page is this server's: it has a sample of one of its names."""
        keep = self.keep()
        return any(name.startswith(keep) for name in samples)

    def read(self, samples: Samples) -> MetricReading:
        r, total = self.ranks, self.ranks.total
        h = self.ttft_histogram
        # a server that does not speculate still exports the gauge, as 0 (SGLang sets it so): an accept length is
        # at least 1 (the bonus token) when it does, so 0 says "not speculating", never a figure
        accept_len = r.mean(samples, self.accept_len)
        speculating = accept_len is not None and accept_len > 0
        return MetricReading(
            decode_tokens=total(samples, self.decode_tokens), tokens_per_s=total(samples, self.tokens_per_s),
            running=total(samples, self.running), queued=total(samples, self.queued),
            accept_len=accept_len if speculating else None,
            accept_rate=r.mean(samples, self.accept_rate) if speculating else None,
            spec_drafts=total(samples, self.spec_drafts), spec_accepted=total(samples, self.spec_accepted),
            spec_draft_tokens=total(samples, self.spec_draft_tokens),
            ttft_sum=total(samples, Series(h + "_sum")) if h else None,
            ttft_count=total(samples, Series(h + "_count")) if h else None)


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """The flag a server sizes its GPU memory by (the share of each GPU it takes), and its value when not given."""

    flag: str
    default: float

    def share(self, argv: Sequence[str]) -> float:
        """The share `argv` gives: the last valid value of the flag (`--flag v`, `--flag=v`, `--flag_name=v`), else
        the default."""
        value = self.default
        for i, a in enumerate(argv):
            name, eq, inline = a.partition("=")
            if name.replace("_", "-") != self.flag:
                continue
            text = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            try:
                v = float(text)
            except ValueError:
                continue
            if 0 < v <= 1:
                value = v
        return value


@dataclass(frozen=True, slots=True)
class MetricsHint:
    """How a server's /metrics figures are turned on: a switch to give (`on`, SGLang's --enable-metrics) or one to
    leave out (not `on`: vLLM serves them unless --disable-log-stats)."""

    flag: str
    on: bool = True

    @property
    def advice(self) -> str:
        return f"start the server {'with' if self.on else 'without'} {self.flag}"
