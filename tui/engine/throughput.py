"""Tokens per second: from the server's /metrics when it serves them, else from its log's own throughput lines;
the sample shown and a bounded history of it.

Which source wins is a state, not a guess per sample: once /metrics answered with figures its samples are the
truth and the log's lines are ignored; a /metrics that is not there (`OFF`) is said to the user, with how to
turn it on.

Neither counts bringup's own readiness probes as throughput: the server counts them (they are real generations),
so the figures are read with the prober's ledger of them (`probes`, tui/collectors/probes.py), which the prober's
client carries to every scrape.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from enum import StrEnum

import httpx

from tui.collectors.bounded import METRICS_MAX, fetch
from tui.collectors.metrics import MetricsRates, from_log_line, without_probes
from tui.collectors.probes import ProbeTokens, probe_tokens_of
from tui.lifecycle.lines import clean
from tui.lifecycle.presets import Preset
from tui.lifecycle.presets.telemetry import LogGroups
from tui.model import LogLine, ThroughputSample

from .gpus import HISTORY
from .grid import sleep_on_grid


class MetricsState(StrEnum):
    #: not asked yet, or no answer with figures yet
    UNKNOWN = "unknown"
    #: /metrics answers with throughput figures
    ON = "on"
    #: the server serves no /metrics (not started with them)
    OFF = "off"


class ThroughputTracker:
    def __init__(self, preset: Preset) -> None:
        self.preset = preset
        self.latest: ThroughputSample | None = None
        self.history: deque[tuple[float, float]] = deque(maxlen=HISTORY)
        self._history_now: tuple[tuple[float, float], ...] | None = None
        self.metrics = MetricsState.UNKNOWN
        self._rates = MetricsRates(preset)
        #: the ledger of bringup's own generations (the prober's): their tokens are no throughput
        self.probes: ProbeTokens | None = None
        #: each group's newest log line (made at the first line: the preset's reader says how long one stands)
        self._groups: LogGroups | None = None

    def new_run(self) -> None:
        """A new run of the server (a restart): the old run's figures, its tokens/s history, its log groups and its
        counters are no figures of this one (issue 51: the panel showed them as the new run's). Whether the
        server serves /metrics is found again by the next scrape."""
        self.latest = None
        self.history.clear()
        self._history_now = None
        self._groups = None
        self._rates = MetricsRates(self.preset)

    def record(self, tp: ThroughputSample, merge: bool = False) -> ThroughputSample:
        """Keep a sample as the one shown. `merge`: a log line with only an acceptance figure updates that figure
        of the sample shown, not the whole sample."""
        if merge and self.latest is not None and tp.tokens_per_s is None:
            tp = replace(self.latest, accept_len=tp.accept_len or self.latest.accept_len, at=tp.at)
        self.latest = tp
        if tp.tokens_per_s is not None:
            self.history.append((tp.at, tp.tokens_per_s))
            self._history_now = None
        return tp

    def history_now(self) -> tuple[tuple[float, float], ...]:
        """The history as it stands, copied once per sample (every snapshot carries it)."""
        if self._history_now is None:
            self._history_now = tuple(self.history)
        return self._history_now

    async def scrape(self, client: httpx.AsyncClient, timeout: float) -> ThroughputSample | None:
        """One scrape of /metrics: the sample it gives (not yet recorded), or None. Sets `metrics`. Raises
        httpx.HTTPError or TimeoutError when the endpoint does not answer."""
        self.probes = probe_tokens_of(client) or self.probes
        asked_at = time.time()
        async with asyncio.timeout(timeout):
            r = await fetch(client, "GET", "/metrics", limit=METRICS_MAX)  # a page past it raises BodyTooLarge
        if r.status_code != 200:
            self.metrics = MetricsState.OFF
            return None
        tp = self._rates.sample(r.text, time.time(), self.probes, asked_at)
        if tp is not None and (tp.tokens_per_s is not None or tp.running is not None):
            self.metrics = MetricsState.ON
            return tp
        return None

    def from_log(self, lines: Sequence[LogLine], word: str) -> ThroughputSample | None:
        """The newest line with `word` that parses: a Prefill line says "input throughput" and is no sample."""
        for line in reversed(lines):
            if word in line.text:
                tp = from_log_line(self.preset, line.text, line.at, self.probes)
                if tp is not None:
                    return tp
        return None

    def from_log_groups(self, lines: Sequence[LogLine]) -> ThroughputSample | None:
        """The server's throughput after a batch of lines: every throughput line read into its group's newest
        (telemetry.py `LogGroups`: a DP group's, an engine's), the groups summed; None when the batch has none.
        bringup's probes are taken out of the sum, not of one group's line."""
        reader = self.preset.log_throughput
        if reader is None:
            return None
        if self._groups is None:
            self._groups = LogGroups(reader.stale_s)
        seen = False
        for line in lines:
            if "throughput" not in line.text:
                continue
            c = clean(line.text)
            tp = reader(c.text, line.at)
            if tp is None or tp.tokens_per_s is None:
                continue
            self._groups.add(reader.group(c.text, c.ranks), tp)
            seen = True
        return without_probes(self._groups.total(), self.probes) if seen else None

    def log_samples(self, lines: Sequence[LogLine]) -> list[ThroughputSample]:
        """The log's own samples in a batch of lines (the groups' sum; the newest acceptance line), when /metrics
        says nothing."""
        if self.metrics == MetricsState.ON:
            return []
        found = (self.from_log_groups(lines), self.from_log(lines, "acceptance"))
        return [tp for tp in found if tp is not None]


Sleep = Callable[[float], Awaitable[None]]

#: the deployment the console shows: a scrape every 2 s. Its headline is a 5 s mean, the server's counters move per
#: batch, nvitop refreshes every 2 s by default and Prometheus every 15 s; each scrape is a request the server logs
#: and a page to parse: scraping every second was about a quarter of the console's CPU on a serving host (py-spy on
#: the H200, benchmarks/console_vs_nvitop.py --profile)
FOREGROUND_METRICS_S = 2.0
#: a fleet's deployment that no one looks at: its tokens/s in the overview row, a mean over 10 s (Prometheus
#: scrapes every 15 s). A scrape through an SSH forward costs the console about 3 ms of CPU (the request through
#: httpx, the forwarded channel's packets, the page parsed): at 5 s it was half of what a deployment added to a
#: fleet (benchmarks/fleet_ssh_cost.py). Opened in the console, it is scraped within a second, then every 2 s
BACKGROUND_METRICS_S = 10.0


def metrics_every(background: bool) -> float:
    """How often /metrics is scraped: in a fleet's background, or on screen."""
    return BACKGROUND_METRICS_S if background else FOREGROUND_METRICS_S


async def _nap(background: Callable[[], bool], seconds: float, sleep: Sleep) -> None:
    """Sleep; a deployment in the background wakes within a second of coming to the foreground (opened in the
    console). Whole seconds at a time in the background, on the engine's grid (tui/engine/grid.py)."""
    if not background():
        await sleep(seconds)
        return
    for _ in range(math.ceil(seconds)):
        await sleep(1.0)
        if not background():
            return


async def metrics_loop(scrape: Callable[[], Awaitable[object]], serving: Callable[[], bool],
                       background: Callable[[], bool], answered: Callable[[], None], *,
                       sleep: Sleep = sleep_on_grid) -> None:
    """Scrape /metrics every FOREGROUND_METRICS_S while the server serves (`serving()`: ready, and not paused),
    every BACKGROUND_METRICS_S while no one looks at it; `scrape()` raises
    httpx.HTTPError or TimeoutError when the endpoint does not answer, and a scrape that answers is `answered()`
    (the collector's note cleared). `sleep`: until the next instant of the engine's grid (a test's virtual clock)."""
    while True:
        if not serving():
            await sleep(1.0)
            continue
        try:
            await scrape()
        except (httpx.HTTPError, TimeoutError):
            await sleep(2.0)
            continue
        answered()
        await _nap(background, metrics_every(background()), sleep)
