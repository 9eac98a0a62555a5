"""The engine's updates as Textual messages: a burst of whole-picture updates coalesces, log lines never do."""

from __future__ import annotations

from tests.helpers import console_states as cs
from tui.console.messages import EngineUpdated
from tui.engine.updates import GpusSampled, LogsRead, PhaseChanged, ThroughputSampled
from tui.lifecycle.lines import LineKind
from tui.model import LogLine, Phase


def test_a_newer_whole_picture_of_the_same_kind_replaces_the_one_queued_before_it() -> None:
    sample, hist = cs.throughput()
    for make in (lambda: PhaseChanged(cs.snapshot(Phase.READY)),
                 lambda: GpusSampled(cs.gpus(10.0, 5), cs.history(10.0)),
                 lambda: ThroughputSampled(sample, tuple(hist))):
        assert EngineUpdated(make()).can_replace(EngineUpdated(make()))
    # another kind tells other news: both are handled
    assert not EngineUpdated(PhaseChanged(cs.snapshot(Phase.READY))).can_replace(
        EngineUpdated(GpusSampled(cs.gpus(10.0, 5), cs.history(10.0))))


def test_log_lines_never_coalesce() -> None:
    """Each batch is lines not drawn yet: dropping one would lose them."""
    a = EngineUpdated(LogsRead((LogLine(at=1.0, text="a"),), (LineKind.PLAIN,)))
    b = EngineUpdated(LogsRead((LogLine(at=2.0, text="b"),), (LineKind.PLAIN,)))
    assert not a.can_replace(b) and not b.can_replace(a)
