"""The reducer's reading of HTTP answers (reducer.py routes `ProbeResult` and `ReleaseReported` here): a generation
the current run answered, after its ready line, makes it ready; an answer asked before the run began or before its
ready line may be the old process's, and is no evidence about this run. Pure, like the reducer.
"""

from __future__ import annotations

from dataclasses import replace

from tui.lifecycle.presets import Preset
from tui.lifecycle.server_version import release_version
from tui.lifecycle.state import ENDED, LifecycleState, enter, new_invocation
from tui.model import Phase, ProbeResult, ReleaseReported, ReleaseSeen, ReleaseSource


def on_probe(s: LifecycleState, ev: ProbeResult, preset: Preset) -> LifecycleState:
    if ev.kind != "generate":
        return s
    r = s.readiness
    if not ev.ok:
        return replace(s, readiness=replace(r, generation_failed_since_ready_line=True)) \
            if r.ready_line_at is not None else s
    if not _is_evidence_now(s, ev.sent_at):
        return s
    return _generation_ok(replace(s, readiness=replace(r, generation_ok_at=ev.at)), ev.at)


def _generation_ok(s: LifecycleState, at: float) -> LifecycleState:
    """A generation the current run answered: with its ready line (or no log to read), the run is ready."""
    r = s.readiness
    if s.phase == Phase.READY:
        return s
    evidence = r.ready_line_at is not None or not s.session.logs_available
    if not evidence or (s.unit is not None and not s.unit.running):
        return s
    if s.phase == Phase.STOPPED:
        s = new_invocation(s, s.invocation, at)
        r = s.readiness
    # the phase began when the server said so, if the very first generation after that succeeded
    since = at
    if r.ready_line_at is not None and not r.generation_failed_since_ready_line:
        since = max(r.ready_line_at, s.timeline[-1].at if s.timeline else r.ready_line_at)
    return enter(s, Phase.READY, since, "ready line + generation probe succeeded")


def _is_evidence_now(s: LifecycleState, sent_at: float) -> bool:
    """A generation that succeeded says something of the current run only if it was sent after the run began and
    after its ready line, and the run has not ended."""
    return _answered_by_this_run(s, sent_at) and not (s.phase in ENDED and s.unit is not None)


def _answered_by_this_run(s: LifecycleState, sent_at: float) -> bool:
    """An HTTP answer is the current run's only if it was asked after the run began and after its ready line
    (answered before the server said it was ready, it may be the old process's: not evidence about this run)."""
    if s.invocation_started is not None and sent_at < s.invocation_started:
        return False
    return s.readiness.ready_line_at is None or sent_at >= s.readiness.ready_line_at


def on_release_reported(s: LifecycleState, ev: ReleaseReported, preset: Preset) -> LifecycleState:
    """The server named its release over HTTP: the current run's, if it was asked of this run (another run's
    answer is dropped, as a probe's is); a start-up line that said it first stands."""
    if s.release is not None or ev.invocation != s.invocation or not _answered_by_this_run(s, ev.sent_at):
        return s
    version = release_version(ev.version)
    if version is None:
        return s  # not a plain release string: still unknown
    return replace(s, release=ReleaseSeen(version, ReleaseSource.HTTP, ev.at, ev.path[:100]))
