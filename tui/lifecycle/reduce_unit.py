"""The reducer's reading of the unit (reducer.py routes `UnitObserved` here): a run begins (queued by a scheduler,
or starting), ends asked or unasked (a stop, a crash, SIGTERM from whoever sent it, a scheduler's verdict), is first
seen on its way out, or is restarted unasked by its service manager (`Restart=`, a failure like any other exit).
Pure, like the reducer: every moment comes from the event.
"""

from __future__ import annotations

from dataclasses import replace

from tui.lifecycle.failures import (
    ended_by_scheduler,
    exited,
    failed_before_first_look,
    stop_reason,
    terminated,
)
from tui.lifecycle.flags import current_values
from tui.lifecycle.presets import Preset
from tui.lifecycle.state import ENDED, STARTUP, LifecycleState, enter, new_invocation
from tui.model import Phase, Transition, UnitObserved, UnitState

#: the line of the transition to `stopping` of a run first seen on its way out
FIRST_SEEN_LEAVING = "(first seen on its way out)"


def on_unit(s: LifecycleState, ev: UnitObserved, preset: Preset) -> LifecycleState:
    u, prev = ev.unit, s.unit
    s = replace(s, unit=u)
    if u.argv and (prev is None or prev.argv != u.argv):
        s = with_flags(s, u.argv, preset)
    if _restarted_unasked(s, u, prev):
        # the service manager restarts the run that died (`Restart=`): its death is a failure like any other exit,
        # kept (with its cause) among the runs failed before the next one (state.py `earlier`). Seen in the gap
        # (systemd's `auto-restart`), or only once the next run is up (the gap is 100 ms by default)
        s = exited(s, preset, u if u.sub == AUTO_RESTART else replace(u, exit_status=None), _ended_at(s, u, ev.at))
    if u.running and u.queued is not None:
        return _unit_queued(s, u, ev.at)
    if u.running:
        return _unit_running(s, u, ev.at)
    if u.active == "deactivating":
        if u.invocation and u.invocation != s.invocation:
            # a run first seen on its way out: stopping, as far as anyone can tell, but the current run from now on
            # (taken for a stop of the last run, it left the phase on no run at all, and a start of a server that
            # died at once waited on it until its timeout); if it ends failed, unasked, it died (_unit_ended)
            s = new_invocation(s, u.invocation, u.started_at or ev.at)
            return enter(s, Phase.STOPPING, ev.at, FIRST_SEEN_LEAVING)
        return s if s.phase == Phase.FAILED else enter(s, Phase.STOPPING, ev.at)
    return _unit_ended(s, u, prev, ev.at, preset)


#: systemd's sub-state between a run's death and the restart `Restart=` makes (the unit still `activating`)
AUTO_RESTART = "auto-restart"


def _restarted_unasked(s: LifecycleState, u: UnitState, prev: UnitState | None) -> bool:
    """The live run has ended and the service manager restarts it: the unit is between the two (systemd's
    `auto-restart`, still the old run's invocation), or a new run is up and the manager counted one more restart."""
    if s.stop_requested or s.phase not in (*STARTUP, Phase.READY) or not s.invocation:
        return False
    if u.sub == AUTO_RESTART:
        return not u.invocation or u.invocation == s.invocation
    return (prev is not None and u.n_restarts > prev.n_restarts and bool(u.invocation)
            and u.invocation != s.invocation)


def _unit_queued(s: LifecycleState, u: UnitState, at: float) -> LifecycleState:
    """A run a scheduler holds in its queue (Slurm's PENDING): a run of its own from its first sight, QUEUED. Its
    reason and expected start, as the scheduler changes them, rewrite the phase's line: the queue is one phase."""
    assert u.queued is not None
    words = (u.queued.words or u.queued.reason)[:300]
    if (u.invocation and u.invocation != s.invocation) or (not s.invocation and s.phase in ENDED):
        return new_invocation(s, u.invocation, u.started_at or at, words, phase=Phase.QUEUED)
    if s.phase != Phase.QUEUED or not s.timeline or s.timeline[-1].line == words:
        return s
    last = s.timeline[-1]
    return replace(s, timeline=(*s.timeline[:-1], Transition(last.phase, last.at, words)))


def _unit_running(s: LifecycleState, u: UnitState, at: float) -> LifecycleState:
    """A run of its own invocation begins; a running unit with no invocation known begins one after a stop."""
    if (u.invocation and u.invocation != s.invocation) or \
            (not s.invocation and s.phase in (Phase.STOPPED, Phase.STOPPING)):
        return new_invocation(s, u.invocation, u.started_at or at)
    if s.phase == Phase.QUEUED:
        # the scheduler started the queued run (on the nodes the manager names): its start-up begins now; a
        # generation is evidence of it only from now on
        since = max(u.started_at or at, s.timeline[-1].at if s.timeline else 0.0)
        return enter(replace(s, invocation_started=since, last_progress=since), Phase.STARTING, since, u.sub)
    if (u.started_at and s.invocation_started is not None and u.started_at > s.invocation_started
            and s.phase != Phase.READY):
        # the run began later than first seen: a deployment over several nodes whose worker's run has joined the
        # head's. A generation is evidence only once every part of the run has started
        return replace(s, invocation_started=u.started_at)
    return s


def _unit_ended(s: LifecycleState, u: UnitState, prev: UnitState | None, at: float,
                preset: Preset) -> LifecycleState:
    if u.invocation and s.invocation and u.invocation != s.invocation:
        # a run that came and went between two readings (a server killed at once): a segment of its own, ended
        # as the manager says (it stayed `stopped`, or kept the last run's failure, before)
        s = new_invocation(s, u.invocation, u.started_at or at)
    if u.verdict is not None and not s.stop_requested:
        return ended_by_scheduler(s, preset, u, _ended_at(s, u, at))  # its word, even over a failure of the log's
    if s.phase == Phase.FAILED:
        return s
    end = _ended_at(s, u, at)
    if (s.phase == Phase.STOPPING and s.timeline and s.timeline[-1].line == FIRST_SEEN_LEAVING
            and not s.stop_requested and u.active == "failed"):
        return exited(s, preset, u, end)  # never seen running, nobody asked it to stop, and it ended failed
    if not s.stop_requested and (stopped := terminated(s, u, end)) is not None:
        return stopped  # SIGTERM while starting up, from whoever sent it: a stop
    # `inactive` is a clean end (stopped by this or another console, systemctl, or exit 0); `failed` is a crash
    if s.stop_requested or s.phase == Phase.STOPPING or u.active == "inactive":
        return enter(replace(s, stop_requested=False), Phase.STOPPED, end, stop_reason(s))
    if _was_live(s, prev):
        return exited(s, preset, u, end)
    if _failed_before_we_looked(s, u):
        return failed_before_first_look(s, preset, u, at)
    return enter(s, Phase.STOPPED, end)


def _ended_at(s: LifecycleState, u: UnitState, at: float) -> float:
    """When the run ended, if the manager knows (a run that ended before we looked must not seem to end now)."""
    since = s.timeline[-1].at if s.timeline else 0.0
    return u.exited_at if u.exited_at is not None and since <= u.exited_at <= at else at


def _was_live(s: LifecycleState, prev: UnitState | None) -> bool:
    """The run was starting or serving, as far as this watch saw."""
    return s.phase in (*STARTUP, Phase.READY) and (prev is None or prev.running or bool(s.invocation))


def _failed_before_we_looked(s: LifecycleState, u: UnitState) -> bool:
    """The first look at a unit finds it failed: no run of it was ever seen."""
    return u.active == "failed" and s.phase == Phase.STOPPED and not s.timeline


def with_flags(s: LifecycleState, argv: tuple[str, ...], preset: Preset) -> LifecycleState:
    return replace(s, session=replace(s.session, flags=tuple(current_values(argv, preset.flags).items())))
