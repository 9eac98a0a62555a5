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
"""

from __future__ import annotations

import re
import signal
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tui.lifecycle.flags import current_values
from tui.lifecycle.lines import CleanLine, clean
from tui.lifecycle.presets import Preset
from tui.model import (
    PROGRESS_ORDER,
    ActionTaken,
    Event,
    Failure,
    FailureKind,
    LogLine,
    NewsResumed,
    NewsStopped,
    Phase,
    ProbeResult,
    Tick,
    Transition,
    UnitObserved,
    UnitState,
)

MAX_EXCERPT = 300
#: lines of the run's log kept for a failure that no recognised line explains (an exit): its last lines say why
TAIL = 20
_RANK = {p: i for i, p in enumerate(PROGRESS_ORDER)}
_STARTUP = (Phase.STARTING, Phase.LOADING, Phase.GRAPH_CAPTURE, Phase.WARMUP)
_TB_CONT = re.compile(
    r"^(?:\s|Traceback \(most recent call last\)|During handling of the above exception"
    r"|The above exception was the direct cause|File \"|\^|~|$)"
)
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)\b")


@dataclass(frozen=True, slots=True)
class MemoryObserved:
    """Total GPU memory used on the deployment's GPUs: a change counts as progress for stall detection."""

    at: float
    used_mib: float


@dataclass(frozen=True, slots=True)
class LifecycleState:
    phase: Phase = Phase.STOPPED
    invocation: str = ""
    invocation_started: float | None = None
    timeline: tuple[Transition, ...] = ()
    failure: Failure | None = None
    unit: UnitState | None = None
    now: float = 0.0
    last_progress: float | None = None
    ready_line_at: float | None = None
    generation_ok_at: float | None = None
    generation_failed_since_ready_line: bool = False
    stop_requested: bool = False
    flags: tuple[tuple[str, str | None], ...] = ()
    # error grouping: the block being read now, and the last finished block with the line number it ended at
    block: tuple[str, ...] = ()
    last_block: tuple[str, ...] = ()
    last_block_end: int = -1
    line_no: int = 0
    failure_open: bool = False  # still appending the failure's traceback
    #: the failure was declared from the unit's exit; the journal may still deliver the lines that say why
    failure_is_exit: bool = False
    last_used_mib: float | None = None
    #: the last TAIL lines of the current run, as shown (an exit with no recognised error shows them)
    tail: tuple[str, ...] = ()
    # configuration, fixed for a session
    require_probe: bool = True
    logs_available: bool = True
    stall_after: float = 60.0
    #: where the server's log can be read (a file, `journalctl -u UNIT`); named when the server exits without a
    #: recognised error. The engine sets it; empty when unknown
    log_source: str = ""

    @property
    def stalled_for(self) -> float | None:
        if self.phase not in _STARTUP or self.last_progress is None:
            return None
        idle = self.now - self.last_progress
        return idle if idle >= self.stall_after else None

    def flag_dict(self) -> dict[str, str | None]:
        return dict(self.flags)

    def seconds_in(self) -> list[tuple[Phase, float, float]]:
        """(phase, entered at, seconds spent) for the current invocation, the last one running until `now`."""
        out = []
        for i, t in enumerate(self.timeline):
            end = self.timeline[i + 1].at if i + 1 < len(self.timeline) else self.now
            out.append((t.phase, t.at, max(0.0, end - t.at)))
        return out


def initial(*, require_probe: bool = True, logs_available: bool = True, stall_after: float = 60.0,
            flags: dict[str, str | None] | None = None, log_source: str = "") -> LifecycleState:
    return LifecycleState(require_probe=require_probe, logs_available=logs_available, stall_after=stall_after,
                          flags=tuple((flags or {}).items()), log_source=log_source)


def _enter(s: LifecycleState, phase: Phase, at: float, line: str = "") -> LifecycleState:
    if s.phase == phase:
        return s
    return replace(s, phase=phase, timeline=(*s.timeline, Transition(phase, at, line[:300])))


def _new_invocation(s: LifecycleState, invocation: str, at: float, line: str = "") -> LifecycleState:
    s = replace(s, invocation=invocation, invocation_started=at, timeline=(), failure=None, ready_line_at=None,
                generation_failed_since_ready_line=False,
                generation_ok_at=None, stop_requested=False, block=(), last_block=(), last_block_end=-1,
                failure_open=False, failure_is_exit=False, last_progress=at, phase=Phase.STOPPED, tail=())
    return _enter(s, Phase.STARTING, at, line)


def _fail(s: LifecycleState, preset: Preset, at: float, excerpt: tuple[str, ...], kind: FailureKind | None,
          open_: bool) -> LifecycleState:
    phase: Phase = s.phase if s.phase not in (Phase.FAILED, Phase.STOPPED, Phase.STOPPING) else Phase.STARTING
    inferred = preset.infer_phase("\n".join(excerpt), phase)
    if inferred != phase and s.phase in _RANK and _RANK.get(inferred, 0) > _RANK[s.phase]:
        # a log that starts mid-way: the traceback says where it was; record that phase (reached by now)
        s = _enter(s, inferred, at, "(phase inferred from the traceback)")
    phase = inferred
    if kind is None:
        kind = preset.classify("\n".join(excerpt), phase)
    f = Failure(phase=phase, kind=kind, excerpt=excerpt[-MAX_EXCERPT:], hint=preset.hint(kind, phase,
                s.flag_dict()), at=at)
    s = replace(s, failure=f, failure_open=open_)
    return _enter(s, Phase.FAILED, at, excerpt[-1] if excerpt else "")


def _extend_failure(s: LifecycleState, preset: Preset, text: str) -> LifecycleState:
    assert s.failure is not None
    excerpt = (*s.failure.excerpt, text)[-MAX_EXCERPT:]
    joined = "\n".join(excerpt)
    phase = s.failure.phase
    if s.timeline and len(s.timeline) >= 2 and s.timeline[-2].phase == Phase.STARTING:
        phase = preset.infer_phase(joined, Phase.STARTING)
    kind = preset.classify(joined, phase)
    f = replace(s.failure, excerpt=excerpt, kind=kind, phase=phase, hint=preset.hint(kind, phase, s.flag_dict()))
    timeline = s.timeline
    if phase != s.failure.phase and timeline and timeline[-1].phase == Phase.FAILED and \
            all(t.phase != phase for t in timeline):
        # the traceback's later frames told where it failed: show that phase before the failure
        timeline = (*timeline[:-1], Transition(phase, timeline[-1].at, "(phase inferred from the traceback)"),
                    timeline[-1])
    return replace(s, failure=f, timeline=timeline)


def _is_block_line(c: CleanLine, preset: Preset) -> bool:
    t = c.text
    if c.level in ("ERROR", "CRITICAL"):
        return True
    if not c.prefixed and (_TB_CONT.match(t) or _EXC_LINE.match(t)):
        return True
    return bool(preset.fatal.search(t))


def _on_line(s: LifecycleState, ev: LogLine, preset: Preset, c: CleanLine | None = None) -> LifecycleState:
    if ev.invocation and s.invocation and ev.invocation != s.invocation:
        if s.invocation_started is not None and ev.at < s.invocation_started:
            return s  # a late line of an older run
        s = _new_invocation(s, ev.invocation, ev.at)
    if c is None:
        c = clean(ev.text)
    text = c.text
    shown = c.body
    if not text.strip():
        return s
    line_no = s.line_no + 1
    s = replace(s, line_no=line_no, last_progress=ev.at, tail=(*s.tail[1 - TAIL:], shown))
    if s.phase == Phase.STOPPED:
        if s.unit is not None or s.stop_requested:
            return s  # late output of a run that has ended
        # output without a unit event: an unmanaged server, or a replayed log starting from its first line
        s = replace(_new_invocation(s, ev.invocation or s.invocation, ev.at, text), tail=(shown,))

    # group tracebacks and error lines into blocks
    in_block = _is_block_line(c, preset) or (
        bool(s.block) and not c.prefixed and bool(text.strip()))
    if in_block:
        block = (*s.block, shown)[-MAX_EXCERPT:]
        s = replace(s, block=block)
    elif s.block:
        s = replace(s, last_block=s.block, last_block_end=line_no - 1, block=())

    if s.phase == Phase.FAILED:
        if s.failure_is_exit and preset.fatal.search(text) and s.failure is not None:
            # the exit was seen before its cause arrived (journals over SSH lag the unit state): the cause wins
            excerpt = s.block or (shown,)
            if s.last_block and s.last_block_end >= line_no - len(s.block) - 3:
                excerpt = (*s.last_block, *excerpt)
            phase = preset.infer_phase("\n".join(excerpt), s.failure.phase)
            kind = preset.classify("\n".join(excerpt), phase)
            f = replace(s.failure, excerpt=excerpt[-MAX_EXCERPT:], kind=kind, phase=phase,
                        hint=preset.hint(kind, phase, s.flag_dict()))
            return replace(s, failure=f, failure_is_exit=False, failure_open=True)
        if s.failure_open and not s.failure_is_exit:
            if preset.consequence is not None and preset.consequence.search(text):
                # the parent's SIGQUIT after the child's crash: what the cause did, not part of it
                return replace(s, failure_open=False)
            s = _extend_failure(s, preset, shown) if in_block else replace(s, failure_open=False)
        return s
    if s.phase == Phase.STOPPING:
        if s.unit is None and not s.stop_requested and _starts_a_run(text, preset):
            # no manager to ask (a replayed log): the server's first line after a clean shutdown is a new run
            return replace(_new_invocation(s, ev.invocation or s.invocation, ev.at, text), tail=(shown,))
        return s

    if preset.fatal.search(text):
        excerpt = s.block or (shown,)
        if s.last_block and s.last_block_end >= line_no - len(s.block) - 3:
            excerpt = (*s.last_block, *excerpt)
        return _fail(s, preset, ev.at, excerpt, None, open_=True)

    if preset.stopping is not None and preset.stopping.search(text):
        # a clean shutdown (SIGTERM handled, uvicorn shutting down): the exit that follows is a stop, not a crash
        return _enter(s, Phase.STOPPING, ev.at, text)

    if preset.ready.search(text) or (preset.serving is not None and preset.serving.search(text)) or \
            (not s.require_probe and preset.answered is not None and preset.answered.search(text)):
        if s.ready_line_at is not None:
            return s
        s = replace(s, ready_line_at=ev.at, generation_failed_since_ready_line=False)
        if not s.require_probe:
            return _enter(s, Phase.READY, ev.at, text)
        if s.generation_ok_at is not None and s.generation_ok_at >= ev.at:
            return _enter(s, Phase.READY, ev.at, text)
        return _enter(s, Phase.WARMUP, ev.at, text) if _RANK.get(s.phase, 0) < _RANK[Phase.WARMUP] else s

    for m in preset.markers:
        if m.pattern.search(text):
            if s.phase in _RANK and _RANK[m.phase] > _RANK[s.phase]:
                s = _enter(s, m.phase, ev.at, text)
            break
    return s


def _starts_a_run(text: str, preset: Preset) -> bool:
    return any(m.phase == Phase.STARTING and m.pattern.search(text) for m in preset.markers)


def _recent_block(s: LifecycleState) -> tuple[str, ...]:
    """The error block (a traceback, ERROR lines) that ends the log, or ended it a few lines ago."""
    if s.block:
        return s.block
    if s.last_block and s.last_block_end >= s.line_no - 3:
        return s.last_block
    return ()


def exit_words(status: int | None, log_source: str = "", *, shown: bool = True, explained: bool = False,
               when: str = "") -> str:
    """How the server process ended, in words that fit any service manager (systemd, a process, docker); unless
    the lines above it explain the exit, where to read why."""
    if status is None:
        what = "the server process exited"
    elif status < 0:
        what = f"the server process was killed by signal {-status}{_signame(-status)}"
    elif status > 128 and _signame(status - 128):
        what = f"the server process exited with status {status} (killed by signal {status - 128}" \
               f"{_signame(status - 128)})"
    else:
        what = f"the server process exited with status {status}"
    what += when
    if explained:
        return what
    where = f" of {log_source}" if log_source else " of its log"
    if shown:
        return f"{what}; no error line was recognised: the lines above are the last{where}"
    return f"{what}; no error line was recognised: read the last lines{where}"


def _signame(n: int) -> str:
    try:
        return f", {signal.Signals(n).name}"
    except ValueError:
        return ""


def _on_unit(s: LifecycleState, ev: UnitObserved, preset: Preset) -> LifecycleState:
    u = ev.unit
    prev = s.unit
    s = replace(s, unit=u)
    if u.argv and (prev is None or prev.argv != u.argv):
        s = replace(s, flags=tuple(current_values(u.argv, preset.flags).items()))
    if u.running:
        if u.invocation and u.invocation != s.invocation:
            return _new_invocation(s, u.invocation, u.started_at or ev.at)
        if not s.invocation and s.phase in (Phase.STOPPED, Phase.STOPPING):
            return _new_invocation(s, u.invocation, u.started_at or ev.at)
        if u.active == "deactivating" and s.phase not in (Phase.FAILED,):
            return _enter(s, Phase.STOPPING, ev.at)
        return s
    if u.active == "deactivating":
        return s if s.phase == Phase.FAILED else _enter(s, Phase.STOPPING, ev.at)
    # the unit is not running
    if u.invocation and s.invocation and u.invocation != s.invocation:
        # a run that came and went between two readings (a server killed at once): a segment of its own, ended
        # as the manager says (it stayed `stopped`, or kept the last run's failure, before)
        s = _new_invocation(s, u.invocation, u.started_at or ev.at)
    if s.phase == Phase.FAILED:
        return s
    # when it ended, if the manager knows (a run that ended before we looked must not seem to end now)
    since = s.timeline[-1].at if s.timeline else 0.0
    end = u.exited_at if u.exited_at is not None and since <= u.exited_at <= ev.at else ev.at
    # `inactive` is a clean end (stopped by this or another console, systemctl, or exit 0); `failed` is a crash
    if s.stop_requested or s.phase == Phase.STOPPING or u.active == "inactive":
        return _enter(replace(s, stop_requested=False), Phase.STOPPED, end)
    if s.phase in (*_STARTUP, Phase.READY) and (prev is None or prev.running or s.invocation):
        cause = _recent_block(s)
        kind = preset.classify("\n".join(cause), s.phase) if cause else FailureKind.EXIT
        if kind == FailureKind.UNKNOWN:
            kind = FailureKind.EXIT
        # the lines that say why: an error block that ends the log, else the log's last lines
        shown = (*cause, *s.tail[max(0, len(s.tail) - (s.line_no - s.last_block_end)):]) if cause and not s.block \
            else cause or s.tail
        lines = (*shown, exit_words(u.exit_status, s.log_source, shown=bool(shown), explained=kind != FailureKind.EXIT))
        s = _fail(s, preset, end, lines, kind, open_=True)
        return replace(s, failure_is_exit=kind == FailureKind.EXIT)
    if u.active == "failed" and s.phase == Phase.STOPPED and not s.timeline:
        # first look at a unit that had already failed before we started watching
        lines = (exit_words(u.exit_status, s.log_source, shown=False, when=" before bringup first looked"),)
        return _fail(replace(s, invocation=u.invocation), preset, ev.at, lines, FailureKind.EXIT, open_=False)
    return _enter(s, Phase.STOPPED, end)


def _on_probe(s: LifecycleState, ev: ProbeResult) -> LifecycleState:
    if ev.kind != "generate":
        return s
    if not ev.ok:
        return replace(s, generation_failed_since_ready_line=True) if s.ready_line_at is not None else s
    if s.invocation_started is not None and ev.sent_at < s.invocation_started:
        return s
    if s.ready_line_at is not None and ev.sent_at < s.ready_line_at:
        return s  # answered before the server said it was ready: not evidence about this moment
    if s.phase in (Phase.FAILED, Phase.STOPPING, Phase.STOPPED) and s.unit is not None:
        return s
    s = replace(s, generation_ok_at=ev.at)
    if s.phase == Phase.READY:
        return s
    evidence = s.ready_line_at is not None or not s.logs_available
    if evidence and (s.unit is None or s.unit.running):
        if s.phase == Phase.STOPPED:
            s = _new_invocation(s, s.invocation, ev.at)
        # the phase began when the server said so, if the very first generation after that succeeded
        at = ev.at
        if s.ready_line_at is not None and not s.generation_failed_since_ready_line:
            at = max(s.ready_line_at, s.timeline[-1].at if s.timeline else s.ready_line_at)
        return _enter(s, Phase.READY, at, "ready line + generation probe succeeded")
    return s


def _quiet(s: LifecycleState, ev: LogLine, c: CleanLine, preset: Preset) -> bool:
    """A line whose only effect on the state is to count as progress: the bulk of a serving server's output.
    Mirrors `_on_line` (every branch that can change more than line_no/last_progress/now is excluded here)."""
    if ev.invocation and s.invocation and ev.invocation != s.invocation:
        return False
    if s.phase in (Phase.STOPPED, Phase.FAILED, Phase.STOPPING) or s.block:
        return False
    t = c.text
    if not t.strip() or c.level in ("ERROR", "CRITICAL"):
        return False
    if not c.prefixed and (_TB_CONT.match(t) or _EXC_LINE.match(t)):
        return False
    if preset.fatal.search(t):
        return False
    if preset.stopping is not None and preset.stopping.search(t):
        return False
    # the ready line and serving lines are searched only before the ready line: after it they change nothing
    serving, answered = preset.serving, preset.answered
    if s.ready_line_at is None and (preset.ready.search(t) or (serving is not None and serving.search(t)) or
                                    (not s.require_probe and answered is not None and answered.search(t))):
        return False
    return s.phase == Phase.READY or not any(m.pattern.search(t) for m in preset.markers)


def reduce_lines(s: LifecycleState, lines: Iterable[LogLine], preset: Preset) -> LifecycleState:
    """Fold many log lines: the same state as `reduce` applied line by line (a property test checks), but a run
    of quiet lines costs one state copy instead of two per line; a burst of 20,000 lines/s must fit in the
    event loop next to the screen and the keys."""
    n, last_at, now = 0, s.last_progress, s.now
    tail: deque[str] = deque(maxlen=TAIL)
    for ev in lines:
        c = clean(ev.text)
        if _quiet(s, ev, c, preset):
            n, last_at, now = n + 1, ev.at, max(now, ev.at)
            tail.append(c.body)
            continue
        if n:
            s, n = replace(s, line_no=s.line_no + n, last_progress=last_at, now=now,
                           tail=(*s.tail, *tail)[-TAIL:]), 0
            tail.clear()
        if ev.at > s.now:
            s = replace(s, now=ev.at)
        s = _on_line(s, ev, preset, c)
        now = s.now
    if n:
        s = replace(s, line_no=s.line_no + n, last_progress=last_at, now=now, tail=(*s.tail, *tail)[-TAIL:])
    return s


def log_ended(s: LifecycleState) -> LifecycleState:
    """The end of a recorded log (replay): a server that was shutting down cleanly when its log ends, stopped."""
    if s.phase == Phase.STOPPING:
        return _enter(replace(s, stop_requested=False), Phase.STOPPED, s.now, "(the log ends during a clean shutdown)")
    return s


def reduce(s: LifecycleState, ev: Event | MemoryObserved, preset: Preset) -> LifecycleState:
    if ev.at > s.now:
        s = replace(s, now=ev.at)
    if isinstance(ev, LogLine):
        return _on_line(s, ev, preset)
    if isinstance(ev, UnitObserved):
        return _on_unit(s, ev, preset)
    if isinstance(ev, ProbeResult):
        return _on_probe(s, ev)
    if isinstance(ev, ActionTaken):
        if ev.action == "stop":
            s = replace(s, stop_requested=True)
            return s if s.phase in (Phase.STOPPED,) else _enter(s, Phase.STOPPING, ev.at)
        if ev.action in ("start", "restart"):
            return replace(s, stop_requested=ev.action == "restart")
        return s
    if isinstance(ev, MemoryObserved):
        if s.last_used_mib is None or abs(ev.used_mib - s.last_used_mib) >= 256:
            return replace(s, last_used_mib=ev.used_mib,
                           last_progress=ev.at if s.last_used_mib is not None else s.last_progress)
        return s
    if isinstance(ev, Tick):
        return s
    if isinstance(ev, NewsStopped):
        # the phase stays what was last seen (nothing says it changed); the timeline says when news stopped
        if not s.timeline or s.timeline[-1].phase != Phase.UNKNOWN:
            at = max(ev.at, s.timeline[-1].at) if s.timeline else ev.at  # never before what was last seen
            return replace(s, timeline=(*s.timeline, Transition(Phase.UNKNOWN, at, ev.reason[:300])))
        return s
    if isinstance(ev, NewsResumed):
        if s.timeline and s.timeline[-1].phase == Phase.UNKNOWN:
            return replace(s, timeline=(*s.timeline, Transition(s.phase, ev.at, "news again")))
        return s
    return s
