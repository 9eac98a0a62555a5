"""An outage of the news (a hung link, tests/e2e/test_stale.py) in the lifecycle reducer: a segment of its own in
the timeline, and the phase it interrupted kept once the news is back."""

from __future__ import annotations

from tests.helpers.reducer_events import SGLANG, feed, warmup_seen
from tui.model import NewsResumed, NewsStopped, Phase, ProbeResult


def test_an_outage_is_a_segment_of_its_own_and_the_phase_is_kept() -> None:
    s = feed([*warmup_seen(), ProbeResult(at=106.0, kind="generate", ok=True, status=200)])
    assert s.phase == Phase.READY
    s = feed([NewsStopped(110.0, "no news from gpu-box"), NewsResumed(150.0)], s, preset=SGLANG)
    assert [t.phase for t in s.timeline][-3:] == [Phase.READY, Phase.UNKNOWN, Phase.READY]
    assert s.timeline[-2].at == 110.0 and s.timeline[-1].at == 150.0 and s.phase == Phase.READY
