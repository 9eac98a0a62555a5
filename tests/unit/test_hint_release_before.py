"""A run that fails before it says its release is hinted in the words of the release the deployment's last run
said (issue 51, finding 10): the failure hint said `--set disable-cuda-graph` (deprecated in SGLang 0.5.23) while
the record's way back, and `--set`, spelled `cuda-graph-backend-{decode,prefill}=disabled`."""

from __future__ import annotations

from dataclasses import replace

from tests.helpers.reducer_events import (
    CAPTURE_BEGIN,
    DECODE_LINE,
    DFLASH_ARGV,
    LOAD_BEGIN,
    LOAD_END,
    READY_LINE,
    REPLAY_TRACEBACK,
    SCHED_EXC,
    feed,
    gen,
    line,
    unit,
)
from tui.lifecycle.reducer import initial
from tui.lifecycle.state import new_invocation
from tui.model import FailureKind, ReleaseSeen, ReleaseSource

EVENTS = [unit(100, started=100, argv=DFLASH_ARGV), line(101, LOAD_BEGIN), line(102, LOAD_END),
          line(103, CAPTURE_BEGIN), line(104, READY_LINE), gen(105), line(200, DECODE_LINE),
          line(255, SCHED_EXC), *[line(255, tb) for tb in REPLAY_TRACEBACK]]


def test_the_hint_spells_the_fix_as_the_release_the_last_run_said() -> None:
    s = feed(EVENTS, release_before="0.5.23")
    assert s.release is None and s.failure is not None and s.failure.kind == FailureKind.CUDA_GRAPH
    assert "--set cuda-graph-backend-decode=disabled --set cuda-graph-backend-prefill=disabled" in s.failure.hint
    assert "disable-cuda-graph" not in s.failure.hint


def test_with_no_release_ever_said_the_spelling_every_release_takes_stays() -> None:
    s = feed(EVENTS)
    assert s.failure is not None and "--set disable-cuda-graph" in s.failure.hint



def test_a_watch_that_heard_a_release_hints_the_next_run_in_its_words() -> None:
    """A console watching on: the release the last run said carries over to the next run, until it says its own."""
    said = replace(initial(), release=ReleaseSeen("0.5.23", ReleaseSource.LOG, 11.0, ""))
    s = new_invocation(said, "next", 20.0)
    assert s.release is None and s.session.release_before == "0.5.23"
