"""When the readiness probe runs: fast while the picture is changing, slow once the server proves itself alive.

A generation probe every 2 s writes an access line into the server's own log every 2 s and costs a forward pass; once
a run is ready and its counters (`/metrics`, or the log's stat lines) show it serving, liveness is proven by them and
one generation every `slow_s` is enough. The probe goes back to the fast cadence as soon as that proof is missing or
old: counters stall while requests wait, the unit changes, a restart is under way, or the operator asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tui.model import Phase, ThroughputSample


class Pace(Enum):
    FAST = "fast"  # a /health every few seconds and a generation when it matters: the phase is in question
    SLOW = "slow"  # the counters prove the run alive; one generation every `slow_s` proves it answers end to end


@dataclass
class ProbeCadence:
    """A pure policy (no clock of its own: every call says when), so the console, a test and a benchmark agree."""

    slow_s: float = 30.0
    #: counters older than this prove nothing: the scrape or the log has gone quiet
    evidence_s: float = 10.0
    #: requests waiting and no token for this long: the counters stall, probe fast again
    stall_s: float = 5.0
    #: after the unit changed, an action or the operator's request, stay fast this long
    wake_s: float = 30.0
    _woken_at: float | None = None
    _asked = False  # the operator asked for a generation now
    _sample_at: float | None = None
    _serving_at: float | None = None  # last sample with tokens flowing, or nothing to do (metrics say idle)
    _waiting_since: float | None = None  # requests running or queued while no token flowed

    def woke(self, at: float, asked: bool = False) -> None:
        """The unit changed, or a restart or stop began: the probe must see at once, and keep looking for a while.
        `asked`: the operator asked for one generation now (the console's `g`), which is all it sends: the counters
        still prove the run alive, and a /health every 2 s afterwards would only fill the server's log."""
        if asked:
            self._asked = True
        else:
            self._woken_at = at

    def take_asked(self) -> bool:
        """Whether the operator asked for a generation since the last one (asking once sends one)."""
        asked, self._asked = self._asked, False
        return asked

    def generation_due(self, now: float, last_generation: float, phase: Phase) -> bool:
        """Once ready, a generation every `slow_s` at either pace: the fast pace adds /health in between."""
        return phase == Phase.READY and now - last_generation >= self.slow_s

    def sampled(self, tp: ThroughputSample) -> None:
        self._sample_at = tp.at
        busy = bool(tp.running) or bool(tp.queued)
        if tp.tokens_per_s is not None and tp.tokens_per_s > 0:
            self._serving_at, self._waiting_since = tp.at, None
        elif busy:
            if self._waiting_since is None:
                self._waiting_since = tp.at
        elif (tp.source == "metrics" and tp.running == 0 and tp.queued == 0) or \
                (tp.source == "log" and tp.tokens_per_s == 0 and tp.running == 0 and not tp.queued):
            # idle by the server's own gauges (or its stat line, bringup's own probe taken out of it): nothing to do
            # is no hang (the slow generation still checks)
            self._serving_at, self._waiting_since = tp.at, None

    def pace(self, now: float, phase: Phase, scrape_every_s: float = 0.0) -> Pace:
        """`scrape_every_s`: how often /metrics is scraped now when its counters are the evidence (a fleet's
        background deployment: seldom); they are old only once the next scrape is late too, or it would probe fast
        before every scrape."""
        if phase != Phase.READY:
            return Pace.FAST
        if self._woken_at is not None and now - self._woken_at < self.wake_s:
            return Pace.FAST
        evidence_s = max(self.evidence_s, 2 * scrape_every_s)
        if self._sample_at is None or now - self._sample_at > evidence_s:
            return Pace.FAST
        if self._waiting_since is not None and now - self._waiting_since >= self.stall_s:
            return Pace.FAST
        if self._serving_at is None or now - self._serving_at > evidence_s + self.stall_s:
            return Pace.FAST
        return Pace.SLOW
