"""The lifecycle panel's words as functions (widgets/lifecycle.py): durations in one notation whatever the phase, a
past phase keeping the notation it had, the timeline broken between phases never inside one, the latest progress
line of a real log (access lines skipped, its figures kept when cut). The panel drawn: tests/console/
test_lifecycle_panel.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.helpers import console_states as cs
from tui.lifecycle.lines import latest_progress
from tui.lifecycle.replay import replay
from tui.model import Phase, Transition
from widgets.lifecycle import fmt_age, timeline_text

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def test_durations_read_in_one_notation_whatever_the_phase() -> None:
    assert fmt_age(42.34, Phase.LOADING) == "42.3s"
    assert fmt_age(150.0, Phase.LOADING) == "2m30s"  # still per second: loading or hung?
    assert fmt_age(42.34, Phase.READY) == "42.3s"  # just became ready: the seconds matter
    assert fmt_age(150.0, Phase.READY) == "2m"
    assert fmt_age(7500.0, Phase.FAILED) == "2h05m"
    assert fmt_age(7500.0, Phase.LOADING) == "2h05m"


def test_a_ready_server_past_a_minute_reads_the_same_for_the_rest_of_the_minute() -> None:
    shown = {fmt_age(t, Phase.READY) for t in range(120, 180)}
    assert shown == {"2m"}
    assert len({fmt_age(t, Phase.GRAPH_CAPTURE) for t in range(120, 180)}) == 60  # in progress: every second


def test_a_past_phase_keeps_the_notation_it_had_while_it_lasted() -> None:
    """`ready 2m` while ready must not turn into `ready 2:03` once the next phase begins."""
    t0 = cs.T0
    ready = (Transition(Phase.LOADING, t0, ""), Transition(Phase.READY, t0 + 30, ""))
    snap = replace(cs.snapshot(Phase.READY), timeline=ready)
    while_ready = timeline_text(snap, t0 + 30 + 123, 200).plain
    after = replace(snap, timeline=(*ready, Transition(Phase.STOPPING, t0 + 30 + 123, "")))
    assert "ready 2m" in while_ready and "ready 2m ›" in timeline_text(after, t0 + 160, 200).plain


def test_the_timeline_breaks_between_phases_never_inside_one() -> None:
    snap = cs.snapshot(Phase.READY)
    for width in range(12, 120):
        text = timeline_text(snap, cs.T0 + 117.6, width).plain
        items = [i.strip() for row in text.splitlines() for i in row.split("›")]
        assert items == ["starting 1.2s", "loading 1m12s", "graph-capture 22.0s", "warmup 5.0s", "ready 16.6s"], \
            (width, text)


def test_the_latest_progress_line_of_a_real_log_skips_access_lines() -> None:
    """SGLang, 8 ranks capturing CUDA graphs (a public log): the panel says what it is doing now; a probe's
    access line after it says nothing about progress."""
    lines = (LOGS / "sglang_tp8_capture_in_progress.log").read_text(encoding="utf-8").splitlines()
    s = replay(lines).state
    assert latest_progress(s.blocks.tail).startswith("Capture cuda graph bs [1, 2, 4, 8")
    access = '[2025-10-16 09:06:23] INFO:     127.0.0.1:41234 - "GET /health HTTP/1.1" 503 Service Unavailable'
    s2 = replay([*lines, access]).state
    assert latest_progress(s2.blocks.tail) == latest_progress(s.blocks.tail)
    assert latest_progress(()) == ""


def test_a_progress_line_too_long_for_the_panel_keeps_its_figures() -> None:
    from widgets.lifecycle import _one_row

    shard = "Loading safetensors checkpoint shards:  68% Completed | 44/64 [00:41<01:00,  1.58s/it]"
    assert _one_row(shard, 36) == "68% 44/64 Loading safetensors check…"
    capture = "Capturing batches (bs=256 avail_mem=12.01 GB):  45%|████▌     | 23/51 [00:05<00:06, 4.2it/s]"
    assert _one_row(capture, 40).startswith("45% 23/51 Capturing batches (bs=256")
    assert _one_row("Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16", 20) == "Load weight end. ty…"
    assert _one_row(shard, 200) == shard
