"""A deployment's run history: the rules over its records (one per run, keyed by its invocation; run_record.py),
pure.

The record is what an ETA and an incident write-up need and nothing more: the flags (a hash of the whole command
line, the options, the change from the run before), the phase timeline with durations, how the run ended and why,
the GPU memory at ready and at each step that led to the run, the release, and the bringup actions on it. Secrets
never reach it: the command line, the flags and the failure's excerpt are stored redacted (tui/lifecycle/secrets.py).
Here: the flags and their change, a record from what the engine saw (`record_of`, bounded as run_record.py bounds
every record), a record put in the list (`upsert`), the runs before one (`previous_of`, `failed_before`,
`last_ready_before`) and the way back to the last flags that reached ready (`going_back`). The file the history
lives in is tui/engine/history.py's; this module neither reads nor writes anything.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tui.lifecycle.run_record import (
    MAX_STEPS,
    ActionRecord,
    FailureRecord,
    GpuStep,
    RunEnd,
    RunRecord,
    Span,
    bounded,
)
from tui.lifecycle.secrets import redact_argv, redact_flags, redact_text
from tui.lifecycle.state import LOOP_GAP_S, MAX_EARLIER, FailedRun
from tui.model import PROGRESS_ORDER, Failure, FailureKind, Phase, Transition

#: runs kept per deployment: enough for an ETA and for the runs a write-up compares with, small enough to rewrite
#: the whole file at every change (a record with a whole traceback is some 30 KB)
MAX_RUNS = 50
#: excerpt lines kept per failed run: a traceback's end is where its cause is
MAX_EXCERPT_LINES = 200


# ---------------------------------------------------------------- flags


def options(argv: Sequence[str]) -> dict[str, str | None]:
    """Every option of a command line, by name without dashes: what "the same flags" compares. Any option counts,
    not only the ones bringup edits: a changed --model-path is another run."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and len(a) > 2:
            name, eq, value = a[2:].partition("=")
            if eq:
                out[name] = value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out[name] = argv[i + 1]
                i += 1
            else:
                out[name] = None
        i += 1
    return out


def argv_hash(argv: Sequence[str]) -> str:
    """The whole command line's fingerprint (secrets included, so a new key is another command line, yet the key
    itself is never stored)."""
    return hashlib.sha256("\0".join(argv).encode("utf-8", "replace")).hexdigest()[:16]


def flags_diff(old: Mapping[str, str | None], new: Mapping[str, str | None]) -> tuple[str, ...]:
    """`+ --name value`, `- --name`, `~ --name a -> b`: the words restart prints for a change."""
    out = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            out.append(f"- --{name}" + ("" if old[name] is None else f" {old[name]}"))
        elif name not in old:
            out.append(f"+ --{name}" + ("" if new[name] is None else f" {new[name]}"))
        elif old[name] != new[name]:
            out.append(f"~ --{name} {old[name]} -> {new[name]}")
    return tuple(out)


def going_back(deployment: str, failed: Mapping[str, str | None], ready: Mapping[str, str | None]) -> str:
    """The `bringup restart` that puts the flags of a ready run back, from a failed run's; "" when they are the
    same. A secret's redacted value cannot be given back, so such a change is left to the operator (said)."""
    words: list[str] = []
    failed, ready = redact_flags(failed), redact_flags(ready)  # before quoting: a quoted value is no longer found
    for name in sorted(set(failed) | set(ready)):
        if name not in ready:
            words += ["--unset", name]
        elif name not in failed or failed[name] != ready[name]:
            value = ready[name]
            words += ["--set", name if value is None else f"{name}={value}"]
    if not words:
        return ""
    return "bringup restart " + " ".join(shlex.quote(w) for w in [deployment, *words])


# ---------------------------------------------------------------- a record from what the engine saw


def spans(timeline: Sequence[Transition], now: float) -> tuple[Span, ...]:
    out = []
    for i, t in enumerate(timeline):
        end = timeline[i + 1].at if i + 1 < len(timeline) else now
        out.append(Span(t.phase, t.at, round(max(0.0, end - t.at), 3)))
    return tuple(out)


def outcome_of(phase: Phase, failure: Failure | None, timeline: Sequence[Transition] = ()) -> RunEnd:
    """How the run ended: failed (whenever it did), else ready once it was (a ready run stopped later by a restart
    reached ready all the same), else stopped, else still under way."""
    if failure is not None or phase == Phase.FAILED:
        return RunEnd.FAILED
    if phase == Phase.READY or any(t.phase == Phase.READY for t in timeline):
        return RunEnd.READY
    if phase in (Phase.STOPPED, Phase.STOPPING):
        return RunEnd.STOPPED
    return RunEnd.UNDER_WAY


@dataclass(frozen=True, slots=True)
class Observed:
    """What a watcher knows of one run when it writes its record (the engine fills it from its state)."""

    deployment: str
    invocation: str
    started_at: float
    argv: tuple[str, ...]
    timeline: tuple[Transition, ...]
    phase: Phase
    now: float
    failure: Failure | None = None
    release: str = ""
    host: str = ""
    unit: str = ""
    gpu_used_mib: float | None = None
    gpu_steps: tuple[GpuStep, ...] = ()
    actions: tuple[ActionRecord, ...] = ()
    #: the run's last progress, when it is stalled now (None: not stalled), and its last line
    stalled_since: float | None = None
    last_line: str = ""


def record_of(o: Observed, previous: RunRecord | None) -> RunRecord:
    """The record of the run observed; `previous` is the deployment's run before it (its flags give the diff)."""
    flags = options(o.argv)
    red = redact_flags(flags)
    outcome = outcome_of(o.phase, o.failure, o.timeline)
    if outcome is RunEnd.UNDER_WAY and o.stalled_since is not None:
        outcome = RunEnd.STALLED
    # a resting phase's clock stops where it began: ready "for 3 h" says nothing of how long the start-up took
    tl = spans(o.timeline, o.now)
    if tl and tl[-1].phase in (Phase.READY, Phase.FAILED, Phase.STOPPED):
        tl = (*tl[:-1], replace(tl[-1], seconds=0.0))
    diff = flags_diff(previous.flag_dict(), red) if previous is not None else ()
    failure = None
    if o.failure is not None:
        failure = FailureRecord(o.failure.phase, str(o.failure.kind), redact_text(o.failure.hint),
                                tuple(redact_text(x) for x in o.failure.excerpt[-MAX_EXCERPT_LINES:]))
    return bounded(RunRecord(
        invocation=o.invocation, deployment=o.deployment, started_at=o.started_at, argv_hash=argv_hash(o.argv),
        argv=tuple(redact_argv(o.argv)), flags=tuple((k, v if v is None else str(v)) for k, v in red.items()),
        flags_diff=diff,
        timeline=tl, outcome=outcome, failure=failure,
        gpu_mib_at_ready=o.gpu_used_mib if o.phase == Phase.READY else None, release=o.release, host=o.host,
        unit=o.unit, gpu_steps=o.gpu_steps[-MAX_STEPS:], actions=_with_change(o.actions, diff)[-MAX_STEPS:],
        recorded_at=o.now, stalled_since=o.stalled_since if outcome is RunEnd.STALLED else None,
        last_line=redact_text(o.last_line)))


def _with_change(actions: Sequence[ActionRecord], diff: Sequence[str]) -> tuple[ActionRecord, ...]:
    """The start (or restart) that began the run made its change of flags: said with the action."""
    change = ", ".join(diff)
    return tuple(replace(a, change=change) if change and not a.change and a.action in ("start", "restart") else a
                 for a in actions)


def upsert(runs: Sequence[RunRecord], record: RunRecord, keep: int = MAX_RUNS) -> list[RunRecord]:
    """The history with `record` in it: merged into the run of the same invocation (never a second record for one
    run), else added; in order of start, the oldest dropped past `keep`."""
    out = list(runs)
    for i, r in enumerate(out):
        if r.invocation == record.invocation:
            out[i] = r.merged(record)
            break
    else:
        out.append(record)
    out.sort(key=lambda r: r.started_at)
    return out[-keep:]


def previous_of(runs: Sequence[RunRecord], invocation: str, started_at: float) -> RunRecord | None:
    """The run before this one (by start), not itself."""
    before = [r for r in runs if r.invocation != invocation and r.started_at < started_at]
    return before[-1] if before else None


def failed_before(runs: Sequence[RunRecord], invocation: str, started_at: float) -> tuple[FailedRun, ...]:
    """The runs on record that failed one after another right before this one (oldest first): what a look at a
    crash loop that no watch of its own followed (`status`) knows of the runs before the current one. The walk back
    stops at a run that did not fail, or one that failed more than LOOP_GAP_S before the next began."""
    out: list[FailedRun] = []
    nxt = started_at
    for r in reversed([r for r in runs if r.invocation != invocation and r.started_at < started_at]):
        if r.outcome != RunEnd.FAILED or r.failure is None:
            break
        f = r.failure
        at = next((sp.at for sp in r.timeline if sp.phase == Phase.FAILED), r.recorded_at or r.started_at)
        if nxt - at > LOOP_GAP_S:
            break
        try:
            kind = FailureKind(f.kind)
        except ValueError:
            kind = FailureKind.UNKNOWN
        out.append(FailedRun(r.invocation, r.started_at, Failure(f.phase, kind, f.excerpt, f.hint, at)))
        nxt = r.started_at
    return tuple(reversed(out[-MAX_EARLIER:]))


def last_ready_before(runs: Sequence[RunRecord], run: RunRecord) -> RunRecord | None:
    ready = [r for r in runs if r.reached_ready and r.started_at < run.started_at]
    return ready[-1] if ready else None


def startup_phases() -> tuple[Phase, ...]:
    return tuple(p for p in PROGRESS_ORDER if p != Phase.READY)
