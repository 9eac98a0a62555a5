"""The reducer's state: the phase model, with its sub-states kept apart so each reads on its own.

`LifecycleState` holds what the console shows (phase, timeline, failure) and what decides it; the readiness
evidence, the error blocks of the log and the session's settings are sub-states, each replaced whole. Nothing
outside the reducer writes any of it: every change is an event (tui/model.py `Event`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from tui.lifecycle.error_blocks import ErrorBlocks
from tui.model import PROGRESS_ORDER, Failure, Phase, ReleaseSeen, Transition, UnitState

RANK = {p: i for i, p in enumerate(PROGRESS_ORDER)}
STARTUP = (Phase.STARTING, Phase.LOADING, Phase.GRAPH_CAPTURE, Phase.WARMUP)
#: the phases before ready: a queued run (a scheduler's, no process yet: never stalled) and the start-up's; an ETA
#: is told in each
BEFORE_READY = (Phase.QUEUED, *STARTUP)
#: the phases of a run that has ended or is ending: what it says now is no evidence of a run
ENDED = (Phase.STOPPED, Phase.FAILED, Phase.STOPPING)
#: a transition keeps this much of the line that caused it
_LINE = 300


class Excerpt(StrEnum):
    """Whether the failure's excerpt is still being written."""

    #: complete, or no failure
    CLOSED = "closed"
    #: still appending the failure's traceback
    OPEN = "open"
    #: the failure was declared from the unit's exit; the journal may still deliver the lines that say why (journals
    #: over SSH lag the unit state), and the cause wins when it comes
    AWAITING_CAUSE = "awaiting-cause"
    #: the run had exited before bringup first looked: none of its log was seen yet, and its lines, read back, are
    #: the excerpt (the last of them, or the cause when one comes)
    AWAITING_LOG = "awaiting-log"


@dataclass(frozen=True, slots=True)
class Readiness:
    """The current run's evidence of readiness: its own ready line and the generation probes since."""

    ready_line_at: float | None = None
    generation_ok_at: float | None = None
    generation_failed_since_ready_line: bool = False


@dataclass(frozen=True, slots=True)
class Session:
    """What the watch knows beside the run's events, kept across runs: how strict readiness is, and the server's
    flags (for a failure's hint)."""

    #: readiness needs a generation probe besides the ready line (off in a replay, where none can run)
    require_probe: bool = True
    #: the server's log can be read; without it, a probe alone is the evidence
    logs_available: bool = True
    stall_after: float = 60.0
    #: where the server's log can be read (a file, `journalctl -u UNIT`); named when the server exits without a
    #: recognised error. Empty when unknown
    log_source: str = ""
    flags: tuple[tuple[str, str | None], ...] = ()
    #: the release the deployment's last run on record said (its history): a run that fails before it says its
    #: own is hinted in that release's words, as `--set` and the record's way back read it (issue 51: the hint said
    #: `--set disable-cuda-graph`, deprecated in 0.5.23, while the record said `cuda-graph-backend-*=disabled`)
    release_before: str = ""


#: runs kept in `LifecycleState.earlier`
MAX_EARLIER = 20
#: a run that starts this long after the failure before it is no longer that failure's restart: the count begins anew
LOOP_GAP_S = 15 * 60.0


@dataclass(frozen=True, slots=True)
class FailedRun:
    """A run that failed just before the current one: a new run's start forgets everything of the last, and in a
    crash loop (systemd's `Restart=`) that was the failure and its cause."""

    invocation: str
    started_at: float | None
    failure: Failure


@dataclass(frozen=True, slots=True)
class LifecycleState:
    phase: Phase = Phase.STOPPED
    invocation: str = ""
    invocation_started: float | None = None
    timeline: tuple[Transition, ...] = ()
    failure: Failure | None = None
    excerpt: Excerpt = Excerpt.CLOSED
    unit: UnitState | None = None
    #: the latest event's time: the reducer's only clock
    now: float = 0.0
    #: the last log line or GPU memory change (a stall is a long time since)
    last_progress: float | None = None
    last_used_mib: float | None = None
    stop_requested: bool = False
    readiness: Readiness = field(default_factory=Readiness)
    blocks: ErrorBlocks = field(default_factory=ErrorBlocks)
    session: Session = field(default_factory=Session)
    #: the current run's release, once the server has said it (a start-up line, or its HTTP answer)
    release: ReleaseSeen | None = None
    #: the runs that failed one after another just before this one, oldest first (tui/lifecycle/crash_loop.py)
    earlier: tuple[FailedRun, ...] = ()

    @property
    def stalled_for(self) -> float | None:
        if self.phase not in STARTUP or self.last_progress is None:
            return None
        idle = self.now - self.last_progress
        return idle if idle >= self.session.stall_after else None

    # what the engine and `bringup status` read, by the names they had before the sub-states

    @property
    def ready_line_at(self) -> float | None:
        return self.readiness.ready_line_at

    @property
    def logs_available(self) -> bool:
        return self.session.logs_available

    @property
    def require_probe(self) -> bool:
        return self.session.require_probe

    @property
    def log_source(self) -> str:
        return self.session.log_source

    @property
    def failure_open(self) -> bool:
        """The failure's excerpt may still grow (a traceback arriving, or an exit's cause)."""
        return self.excerpt != Excerpt.CLOSED

    @property
    def failure_is_exit(self) -> bool:
        """The failure was declared from the unit's exit and its cause may still arrive."""
        return self.excerpt in (Excerpt.AWAITING_CAUSE, Excerpt.AWAITING_LOG)

    def flag_dict(self) -> dict[str, str | None]:
        return dict(self.session.flags)

    def seconds_in(self) -> list[tuple[Phase, float, float]]:
        """(phase, entered at, seconds spent) for the current invocation, the last one running until `now`."""
        out = []
        for i, t in enumerate(self.timeline):
            end = self.timeline[i + 1].at if i + 1 < len(self.timeline) else self.now
            out.append((t.phase, t.at, max(0.0, end - t.at)))
        return out


def initial(*, require_probe: bool = True, logs_available: bool = True, stall_after: float = 60.0,
            flags: dict[str, str | None] | None = None, log_source: str = "",
            release_before: str = "") -> LifecycleState:
    return LifecycleState(session=Session(require_probe=require_probe, logs_available=logs_available,
                                          stall_after=stall_after, log_source=log_source,
                                          flags=tuple((flags or {}).items()), release_before=release_before))


def enter(s: LifecycleState, phase: Phase, at: float, line: str = "") -> LifecycleState:
    """The run moves to `phase` (no transition when it is there already)."""
    if s.phase == phase:
        return s
    return replace(s, phase=phase, timeline=(*s.timeline, Transition(phase, at, line[:_LINE])))


def new_invocation(s: LifecycleState, invocation: str, at: float, line: str = "",
                   phase: Phase = Phase.STARTING) -> LifecycleState:
    """A new run begins (`phase`: STARTING, or QUEUED for one a scheduler holds): everything about the last one is
    forgotten but the session, and, when it failed, its failure among the runs that failed one after another
    (`earlier`)."""
    session = s.session if s.release is None else replace(s.session, release_before=s.release.version)
    s = replace(s, invocation=invocation, invocation_started=at, timeline=(), failure=None, excerpt=Excerpt.CLOSED,
                readiness=Readiness(), stop_requested=False, blocks=s.blocks.new_run(), last_progress=at,
                phase=Phase.STOPPED, release=None, earlier=_earlier(s, invocation, at), session=session)
    return enter(s, phase, at, line)


def _earlier(s: LifecycleState, invocation: str, at: float) -> tuple[FailedRun, ...]:
    """The failed runs before a run that starts at `at`: the last run's failure added to those before it, or none
    when the last run did not fail (it served, or was stopped) or failed long before."""
    if invocation == s.invocation and s.phase != Phase.FAILED:
        return s.earlier  # the same run begun again (seen starting after a stop): no run ended
    if s.phase != Phase.FAILED or s.failure is None or at - s.failure.at > LOOP_GAP_S:
        return ()
    return (*s.earlier, FailedRun(s.invocation, s.invocation_started, s.failure))[-MAX_EARLIER:]
