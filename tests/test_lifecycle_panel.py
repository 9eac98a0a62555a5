"""The lifecycle panel's text: what changes from one second to the next decides whether it is redrawn."""

from __future__ import annotations

from tui.model import Phase
from widgets.lifecycle import fmt_age


def test_a_phase_in_progress_keeps_tenths_and_a_resting_one_counts_minutes() -> None:
    assert fmt_age(42.34, Phase.LOADING) == "42.3s"
    assert fmt_age(150.0, Phase.LOADING) == "2:30"  # still per second: loading or hung?
    assert fmt_age(42.34, Phase.READY) == "42.3s"  # just became ready: the seconds matter
    assert fmt_age(150.0, Phase.READY) == "2m"
    assert fmt_age(7500.0, Phase.FAILED) == "2h05m"


def test_a_ready_server_past_a_minute_reads_the_same_for_the_rest_of_the_minute() -> None:
    shown = {fmt_age(t, Phase.READY) for t in range(120, 180)}
    assert shown == {"2m"}
    assert len({fmt_age(t, Phase.GRAPH_CAPTURE) for t in range(120, 180)}) == 60  # in progress: every second

