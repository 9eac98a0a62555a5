"""The lifecycle reducer: `state = reduce(state, event, preset)`, a pure function.

It is the single place that decides the phase, so the console, `bringup wait` and `bringup replay` of a recorded
log cannot disagree. No I/O, no clock: every timestamp comes from an event. The rules it enforces come from the
failures of a real K2.6 bring-up:

* ready needs the current invocation's own readiness line AND a generation probe that succeeded after it: a
  `/v1/models` answer (which an old process can still give after a restart) is never enough;
* failed is declared on the first fatal line of the current invocation, or when the unit exits unasked;
* lines and probe results from an older invocation are ignored;
* a stall (no log line and no GPU memory change for `stall_after` seconds while starting up) is a warning that
  separates "still loading" from "hung", not a phase.

The state lives in tui/lifecycle/state.py, the error-block grouping in error_blocks.py, failures in failures.py,
the unit's readings in reduce_unit.py, HTTP answers in reduce_probe.py; this module routes each event to its handler
and reads a log line by concern (phase markers, failure signatures, error blocks, readiness).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tui.lifecycle.error_blocks import MAX_EXCERPT, TAIL, ErrorBlocks
from tui.lifecycle.failures import (
    cause_arrived,
    exit_words,
    extend_failure,
    fail,
    lines_after_exit,
    stop_arrived,
    stop_reason,
)
from tui.lifecycle.lines import CleanLine, LineKind, clean, line_kind
from tui.lifecycle.presets import Preset
from tui.lifecycle.reduce_probe import on_probe, on_release_reported
from tui.lifecycle.reduce_unit import on_unit, with_flags
from tui.lifecycle.server_version import release_in_line
from tui.lifecycle.state import (
    ENDED,
    RANK,
    Excerpt,
    LifecycleState,
    Readiness,
    Session,
    enter,
    initial,
    new_invocation,
)
from tui.model import (
    Action,
    ActionTaken,
    Event,
    FlagsKnown,
    LogLine,
    LogSourceKnown,
    MemoryObserved,
    NewsResumed,
    NewsStopped,
    Phase,
    ProbeRequired,
    ProbeResult,
    ReleaseReported,
    ReleaseSeen,
    ReleaseSource,
    Tick,
    Transition,
    UnitObserved,
)

__all__ = ["MAX_EXCERPT", "TAIL", "ErrorBlocks", "Excerpt", "LifecycleState", "MemoryObserved", "Readiness", "Session",
           "exit_words", "initial", "log_ended", "reduce", "reduce_lines"]

#: GPU memory must move by this much to count as progress (allocator noise does not)
_MEMORY_STEP_MIB = 256

# ---------------------------------------------------------------- log lines


def _on_line(s: LifecycleState, ev: LogLine, preset: Preset, c: CleanLine | None = None) -> LifecycleState:
    if _is_another_run(s, ev):
        if s.invocation_started is not None and ev.at < s.invocation_started:
            return s  # a late line of an older run
        s = new_invocation(s, ev.invocation, ev.at)
    if c is None:
        c = clean(ev.text)
    if not c.text.strip():
        return s
    blocks = s.blocks.counted(c.body)
    if s.phase == Phase.STOPPED:
        if (s.unit is not None or s.stop_requested) and not (ev.invocation and not s.invocation):
            return replace(s, blocks=blocks, last_progress=ev.at)  # late output of a run that has ended
        # else a run never seen before: the log of one that came and went between two readings, read back
        s, blocks = _unannounced_run(s, ev, c, blocks.line_no)
    in_block = blocks.in_block(c, preset)
    s = replace(s, blocks=blocks.grouped(c.body, in_block), last_progress=ev.at)
    if s.release is None and preset.version_line is not None:
        s = _release_line(s, ev, preset, c)
    if s.phase == Phase.FAILED:
        return _after_failure(s, preset, c, in_block)
    if s.phase == Phase.STOPPING:
        return _while_stopping(s, ev, preset, c)
    return _while_running(s, ev, preset, c)


def _release_line(s: LifecycleState, ev: LogLine, preset: Preset, c: CleanLine) -> LifecycleState:
    """The run states its release at start-up (vLLM): known from that line on, whatever the phase."""
    assert preset.version_line is not None
    version = release_in_line(c.text, preset.version_line)
    if version is None:
        return s
    return replace(s, release=ReleaseSeen(version, ReleaseSource.LOG, ev.at, c.text[:300]))


def _is_another_run(s: LifecycleState, ev: LogLine) -> bool:
    return bool(ev.invocation and s.invocation and ev.invocation != s.invocation)


def _unannounced_run(s: LifecycleState, ev: LogLine, c: CleanLine, line_no: int) -> tuple[LifecycleState, ErrorBlocks]:
    """Output without a unit event: an unmanaged server, or a replayed log starting from its first line."""
    s = new_invocation(s, ev.invocation or s.invocation, ev.at, c.text)
    return s, ErrorBlocks(line_no=line_no, tail=(c.body,))


def _after_failure(s: LifecycleState, preset: Preset, c: CleanLine, in_block: bool) -> LifecycleState:
    """A failed run's later lines: its cause (after an exit), or more of its traceback, until the block ends."""
    if s.excerpt in (Excerpt.AWAITING_CAUSE, Excerpt.AWAITING_LOG) and s.failure is not None and \
            preset.fatal.search(c.text):
        return cause_arrived(s, preset, s.blocks.cause(c.body))
    if s.excerpt == Excerpt.AWAITING_CAUSE and (stopped := stop_arrived(s, preset, c.text)) is not None:
        return stopped  # the exit's lagging lines say it was a clean stop
    if s.excerpt in (Excerpt.AWAITING_CAUSE, Excerpt.AWAITING_LOG) and s.failure is not None and s.unit is not None:
        return lines_after_exit(s, preset)
    if s.excerpt != Excerpt.OPEN:
        return s
    if preset.consequence is not None and preset.consequence.search(c.text):
        # the parent's SIGQUIT after the child's crash: what the cause did, not part of it
        return replace(s, excerpt=Excerpt.CLOSED)
    return extend_failure(s, preset, c.body) if in_block else replace(s, excerpt=Excerpt.CLOSED)


def _while_stopping(s: LifecycleState, ev: LogLine, preset: Preset, c: CleanLine) -> LifecycleState:
    if s.unit is None and not s.stop_requested and _starts_a_run(c.text, preset):
        # no manager to ask (a replayed log): the server's first line after a clean shutdown is a new run
        s = new_invocation(s, ev.invocation or s.invocation, ev.at, c.text)
        return replace(s, blocks=replace(s.blocks, tail=(c.body,)))
    return s


def _while_running(s: LifecycleState, ev: LogLine, preset: Preset, c: CleanLine) -> LifecycleState:
    """A starting or serving run's line, by concern: a failure signature, a clean shutdown, readiness evidence, a
    phase marker."""
    text = c.text
    if preset.fatal.search(text) or _ends_the_process(s.blocks.block, text):
        return fail(s, preset, ev.at, s.blocks.cause(c.body), None, open_=True)
    if preset.stopping is not None and preset.stopping.search(text):
        # a clean shutdown (SIGTERM handled, uvicorn shutting down): the exit that follows is a stop, not a crash
        return enter(s, Phase.STOPPING, ev.at, text)
    if _is_ready_evidence(s, preset, text):
        return _on_ready_line(s, ev.at, text)
    return _on_marker(s, ev.at, preset, text)


#: a traceback's last line naming an error (not KeyboardInterrupt, SystemExit: a stop; nor CancelledError: a loop
#: cancelled by a shutdown)
_UNCAUGHT_END = re.compile(r"^(?!(?:asyncio\.)?(?:exceptions\.)?CancelledError\b)"
                           r"[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)")
_TRACEBACK_START = "Traceback (most recent call last):"
#: the outermost frame of a program's main thread: its script's module level, or `python -m`'s runpy (a spawned
#: child's is `File "<string>", line 1, in <module>`, and a forked one's multiprocessing's `_bootstrap`)
_ENTRY_FRAME = re.compile(r'File "(?!<string>")[^"]+", line \d+, in (?:<module>|_run_module_as_main)$')


def _ends_the_process(block: tuple[str, ...], text: str) -> bool:
    """The line ends a traceback that began at the program's entry: an exception nothing caught, which ends the
    process that printed it (vLLM's API server refusing its model's config with a pydantic ValidationError before
    any engine starts: no fatal wording, the process gone)."""
    if not _UNCAUGHT_END.match(text) or not block:
        return False
    for i in range(len(block) - 1, -1, -1):
        if _TRACEBACK_START in block[i]:
            frame = next((ln for ln in block[i + 1:] if 'File "' in ln), "")
            return bool(_ENTRY_FRAME.search(frame.rstrip()))
    return False


def _is_ready_evidence(s: LifecycleState, preset: Preset, text: str) -> bool:
    """The ready line, or a line only a serving server prints (or, in a replay, an answered request)."""
    if preset.ready.search(text) or (preset.serving is not None and preset.serving.search(text)):
        return True
    return not s.session.require_probe and preset.answered is not None and bool(preset.answered.search(text))


def _on_ready_line(s: LifecycleState, at: float, text: str) -> LifecycleState:
    if s.readiness.ready_line_at is not None:
        return s
    s = replace(s, readiness=replace(s.readiness, ready_line_at=at, generation_failed_since_ready_line=False))
    ok_at = s.readiness.generation_ok_at
    if not s.session.require_probe or (ok_at is not None and ok_at >= at):
        return enter(s, Phase.READY, at, text)
    return enter(s, Phase.WARMUP, at, text) if RANK.get(s.phase, 0) < RANK[Phase.WARMUP] else s


def _on_marker(s: LifecycleState, at: float, preset: Preset, text: str) -> LifecycleState:
    """The first phase marker the line matches moves a run forward, never back."""
    for m in preset.markers:
        if m.pattern.search(text):
            if s.phase in RANK and RANK[m.phase] > RANK[s.phase]:
                return enter(s, m.phase, at, text)
            return s
    return s


def _starts_a_run(text: str, preset: Preset) -> bool:
    return any(m.phase == Phase.STARTING and m.pattern.search(text) for m in preset.markers)


def _quiet(s: LifecycleState, ev: LogLine, c: CleanLine, preset: Preset, fatal: bool | None = None) -> bool:
    """A line whose only effect on the state is to count as progress: the bulk of a serving server's output.
    Mirrors `_on_line` (every branch that can change more than the line count, the tail, last_progress and now
    is excluded here). `fatal`: whether the line is one of the preset's fatal wordings, when already searched."""
    if _is_another_run(s, ev) or s.phase in ENDED or s.blocks.block:
        return False
    return _says_nothing_new(s, c, preset, fatal)


def _says_nothing_new(s: LifecycleState, c: CleanLine, preset: Preset, fatal: bool | None) -> bool:
    t = c.text
    if not t.strip() or s.blocks.in_block(c, preset, fatal):
        return False
    if preset.stopping is not None and preset.stopping.search(t):
        return False
    if s.release is None and preset.version_line is not None and preset.version_line.search(t):
        return False
    # the ready line and serving lines are searched only before the ready line: after it they change nothing
    if s.readiness.ready_line_at is None and _is_ready_evidence(s, preset, t):
        return False
    return s.phase == Phase.READY or not any(m.pattern.search(t) for m in preset.markers)


# ---------------------------------------------------------------- the rest


def _on_action(s: LifecycleState, ev: ActionTaken, preset: Preset) -> LifecycleState:
    if ev.action == Action.STOP:
        s = replace(s, stop_requested=True)
        return s if s.phase == Phase.STOPPED else enter(s, Phase.STOPPING, ev.at)
    if ev.action in (Action.START, Action.RESTART):
        return replace(s, stop_requested=ev.action == Action.RESTART)
    return s


def _on_memory(s: LifecycleState, ev: MemoryObserved, preset: Preset) -> LifecycleState:
    """GPU memory that moves is progress (weights being copied), once a first reading is known."""
    if s.last_used_mib is None or abs(ev.used_mib - s.last_used_mib) >= _MEMORY_STEP_MIB:
        return replace(s, last_used_mib=ev.used_mib,
                       last_progress=ev.at if s.last_used_mib is not None else s.last_progress)
    return s


def _on_news_stopped(s: LifecycleState, ev: NewsStopped, preset: Preset) -> LifecycleState:
    """The phase stays what was last seen (nothing says it changed); the timeline says when news stopped."""
    if s.timeline and s.timeline[-1].phase == Phase.UNKNOWN:
        return s
    at = max(ev.at, s.timeline[-1].at) if s.timeline else ev.at  # never before what was last seen
    return replace(s, timeline=(*s.timeline, Transition(Phase.UNKNOWN, at, ev.reason[:300])))


def _on_news_resumed(s: LifecycleState, ev: NewsResumed, preset: Preset) -> LifecycleState:
    if s.timeline and s.timeline[-1].phase == Phase.UNKNOWN:
        return replace(s, timeline=(*s.timeline, Transition(s.phase, ev.at, "news again")))
    return s


def _on_tick(s: LifecycleState, ev: Tick, preset: Preset) -> LifecycleState:
    return s  # `reduce` has moved `now` on: that is all the clock does


def _on_flags(s: LifecycleState, ev: FlagsKnown, preset: Preset) -> LifecycleState:
    return with_flags(s, ev.argv, preset)


def _on_log_source(s: LifecycleState, ev: LogSourceKnown, preset: Preset) -> LifecycleState:
    return replace(s, session=replace(s.session, log_source=ev.where))


def _on_probe_required(s: LifecycleState, ev: ProbeRequired, preset: Preset) -> LifecycleState:
    return replace(s, session=replace(s.session, require_probe=ev.required))


_HANDLERS: dict[type, Callable[[LifecycleState, Any, Preset], LifecycleState]] = {
    LogLine: _on_line,
    UnitObserved: on_unit,
    ProbeResult: on_probe,
    ActionTaken: _on_action,
    MemoryObserved: _on_memory,
    Tick: _on_tick,
    NewsStopped: _on_news_stopped,
    NewsResumed: _on_news_resumed,
    FlagsKnown: _on_flags,
    LogSourceKnown: _on_log_source,
    ProbeRequired: _on_probe_required,
    ReleaseReported: on_release_reported,
}


def reduce(s: LifecycleState, ev: Event, preset: Preset) -> LifecycleState:
    if ev.at > s.now:
        s = replace(s, now=ev.at)
    handler = _HANDLERS.get(type(ev))
    return handler(s, ev, preset) if handler is not None else s


# ---------------------------------------------------------------- many lines at once


def reduce_lines(s: LifecycleState, lines: Iterable[LogLine], preset: Preset) -> LifecycleState:
    """Fold many log lines: the same state as `reduce` applied line by line (a property test checks), but a run
    of quiet lines costs one state copy instead of two per line; a burst of 20,000 lines/s must fit in the
    event loop next to the screen and the keys."""
    return _fold(s, lines, preset, None, LineKind.PLAIN)


def reduce_classified(s: LifecycleState, lines: Iterable[LogLine], preset: Preset,
                      after: LineKind = LineKind.PLAIN) -> tuple[LifecycleState, tuple[LineKind, ...]]:
    """`reduce_lines`, and each line's kind for the errors view (lines.py's `line_kind`, with the preset's fatal
    wordings; `after`: the kind of the line before these): what the engine sends with the lines, so a line is
    cleaned once and classified once, by the rules that decide the failure."""
    kinds: list[LineKind] = []
    return _fold(s, lines, preset, kinds, after), tuple(kinds)


def _fold(s: LifecycleState, lines: Iterable[LogLine], preset: Preset, kinds: list[LineKind] | None,
          after: LineKind) -> LifecycleState:
    n, last_at, now = 0, s.last_progress, s.now
    tail: deque[str] = deque(maxlen=TAIL)
    for ev in lines:
        c = clean(ev.text)
        fatal = None
        if kinds is not None:  # the fatal wordings searched once, for the kind and for the reduction
            fatal = bool(preset.fatal.search(c.text))
            after = line_kind(ev.text, c, after, fatal)
            kinds.append(after)
        if _quiet(s, ev, c, preset, fatal):
            n, last_at, now = n + 1, ev.at, max(now, ev.at)
            tail.append(c.body)
            continue
        if n:
            s, n = replace(s, blocks=s.blocks.quiet(n, tuple(tail)), last_progress=last_at, now=now), 0
            tail.clear()
        if ev.at > s.now:
            s = replace(s, now=ev.at)
        s = _on_line(s, ev, preset, c)
        now = s.now
    if n:
        s = replace(s, blocks=s.blocks.quiet(n, tuple(tail)), last_progress=last_at, now=now)
    return s


def log_ended(s: LifecycleState) -> LifecycleState:
    """The end of a recorded log (replay): a server that was shutting down cleanly when its log ends, stopped."""
    if s.phase == Phase.STOPPING:
        return enter(replace(s, stop_requested=False), Phase.STOPPED, s.now,
                     stop_reason(s) or "(the log ends during a clean shutdown)")
    return s
