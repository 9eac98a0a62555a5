"""When to ask the server its release over HTTP: once a run, once the run has said it is ready, unless its log has
already said (vLLM states it at start-up; SGLang never does, so its HTTP answer is the one source).

One request a run, not one a probe: SGLang's `/server_info` asks every scheduler for its state. It goes through
the probe's client, so over SSH it takes the probe's port forward; a run that gave no answer at all (a timeout, a
refused connection, a 5xx) is asked again after `RETRY_S`, and one that answered without a release is not.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from tui.collectors.probes import Prober
from tui.lifecycle.presets import Preset
from tui.lifecycle.reducer import LifecycleState
from tui.model import Phase, ProbeResult, ReleaseReported

#: a run that gave no answer is asked again this long after
RETRY_S = 30.0


@dataclass
class ReleaseQuery:
    """A pure policy (every call says when), so the probe loop, `bringup status` and a test agree."""

    #: the run asked about: (invocation, when it began)
    _asked: tuple[str, float | None] | None = None
    _again_at: float = math.inf

    def due(self, s: LifecycleState, paths: tuple[str, ...], now: float) -> bool:
        if s.release is not None or not paths or s.phase in (Phase.FAILED, Phase.STOPPING, Phase.STOPPED):
            return False
        if s.phase != Phase.READY and s.ready_line_at is None:
            return False  # the port may still be another run's: its answer would be no evidence of this one
        return self._asked != (s.invocation, s.invocation_started) or now >= self._again_at

    def asking(self, s: LifecycleState) -> None:
        self._asked, self._again_at = (s.invocation, s.invocation_started), math.inf

    def unanswered(self, now: float) -> None:
        self._again_at = now + RETRY_S


async def ask_release(query: ReleaseQuery, prober: Prober, s: LifecycleState, preset: Preset) -> ReleaseReported | None:
    """Ask the server its release, if that is due: the answer, for the reducer (which ties it to the run), or None
    (not due, or no release in the answer)."""
    if not query.due(s, preset.version_paths, time.time()):
        return None
    query.asking(s)
    answer = await prober.release(preset.version_paths, preset.version_key, s.invocation)
    if isinstance(answer, ProbeResult):
        if answer.status is None or answer.status >= 500:
            query.unanswered(time.time())
        return None
    return answer
