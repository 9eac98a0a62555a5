"""One run's record in a deployment's history: pure data (`RunRecord`, merged as two writers saw the run), its stored
form (a JSON object, `to_dict` / `from_dict`) and its bounds.

What a server prints reaches the record (its failure's excerpt, the moments its lines gave the phases), and the file
is read back by every later bringup: so a record is bounded in bytes (`bounded`: the excerpt is cut first, from its
start; one verbose traceback made a 3 MB record, 155 MB at the runs kept), every number in it is taken as
tui/guard/numbers.py takes a number from outside (finite, in range: an `inf` once put Infinity in the file, and every
later reader crashed on it), and a stored record that fails is skipped with a note, never a crash (`read_records`).
The history's rules over records are history.py's; the file they live in is tui/engine/history.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from tui.guard.numbers import MAX_COUNT, epoch, real_or_none, seconds
from tui.model import Phase

#: GPU steps and actions kept per run
MAX_STEPS = 40
#: a record's size in the file (its JSON, in bytes): the excerpt is cut to fit first (its start goes, its end, where
#: the cause is, stays), then the steps and actions, then the command line's words
MAX_RECORD_BYTES = 64 * 1024
#: the longest excerpt line kept (a line of megabytes is kept as its start and a mark)
MAX_EXCERPT_LINE = 2048


class RunEnd(StrEnum):
    """How a run ended, as far as anyone watching it saw."""

    UNDER_WAY = "under-way"
    #: under way, but no log line or GPU memory change for the stall threshold: a hang, said as one
    STALLED = "stalled"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Span:
    """One phase of a run: when it began and how long it lasted (to the next phase, or to the last look)."""

    phase: Phase
    at: float
    seconds: float


@dataclass(frozen=True, slots=True)
class GpuStep:
    """The deployment's GPU memory at one step of the restart that led to a run, or of the run itself, and whose
    it was (None where it could not be told)."""

    at: float
    step: str
    used_mib: float | None
    this_run_mib: float | None = None
    previous_run_mib: float | None = None
    other_mib: float | None = None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """A bringup action on the deployment: who (user@host, pid), what (start | stop | restart, or a lock holder's
    purpose), and the change it made."""

    at: float
    who: str
    action: str
    change: str = ""


@dataclass(frozen=True, slots=True)
class FailureRecord:
    phase: Phase
    kind: str
    hint: str
    excerpt: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunRecord:
    invocation: str
    deployment: str
    started_at: float
    argv_hash: str
    #: the command line, secrets' values `***`
    argv: tuple[str, ...] = ()
    #: the options: name without dashes -> value (None for a switch), secrets' values `***`
    flags: tuple[tuple[str, str | None], ...] = ()
    #: the change from the run before (`+ --disable-cuda-graph`), empty for the first run or the same flags
    flags_diff: tuple[str, ...] = ()
    timeline: tuple[Span, ...] = ()
    outcome: RunEnd = RunEnd.UNDER_WAY
    failure: FailureRecord | None = None
    gpu_mib_at_ready: float | None = None
    release: str = ""
    host: str = ""
    unit: str = ""
    gpu_steps: tuple[GpuStep, ...] = ()
    actions: tuple[ActionRecord, ...] = ()
    #: when this record was last written (the writer's clock)
    recorded_at: float = 0.0
    #: a stalled run's last progress (its last log line or GPU memory change), and the last line it printed
    stalled_since: float | None = None
    last_line: str = ""

    def flag_dict(self) -> dict[str, str | None]:
        return dict(self.flags)

    def seconds_in(self, phase: Phase) -> float:
        """Seconds the run spent in `phase` (0 where it never entered it: graph capture with graphs off)."""
        return sum(s.seconds for s in self.timeline if s.phase == phase)

    @property
    def ready_after_s(self) -> float | None:
        """Seconds from the start to ready; None for a run that did not reach it (a run stopped or crashed once
        ready did: its start-up is as good a measure as any)."""
        ready = next((s for s in self.timeline if s.phase == Phase.READY), None)
        return None if ready is None else ready.at - self.timeline[0].at

    @property
    def reached_ready(self) -> bool:
        return self.ready_after_s is not None

    def merged(self, newer: RunRecord) -> RunRecord:
        """This run as two writers saw it (a console and an exporter follow the same run): the fuller view of its
        life wins, and no GPU step or action either saw is lost."""
        base, other = (newer, self) if _fullness(newer) >= _fullness(self) else (self, newer)
        if not base.argv and other.argv:  # a watcher that saw the run only once it had ended saw no command line
            base = replace(base, argv=other.argv, flags=other.flags, argv_hash=other.argv_hash,
                           flags_diff=other.flags_diff)
        failures = [f for f in (base.failure, other.failure) if f is not None]
        if failures:  # the whole traceback, as the watcher that read the most of it has it
            base = replace(base, failure=max(failures, key=lambda f: len(f.excerpt)))
        steps = {(s.at, s.step): s for s in (*self.gpu_steps, *newer.gpu_steps)}
        actions = {(a.at, a.who, a.action): a for a in (*self.actions, *newer.actions)}
        return replace(base, gpu_steps=tuple(sorted(steps.values(), key=lambda s: s.at))[-MAX_STEPS:],
                       actions=tuple(sorted(actions.values(), key=lambda a: a.at))[-MAX_STEPS:],
                       gpu_mib_at_ready=base.gpu_mib_at_ready if base.gpu_mib_at_ready is not None
                       else other.gpu_mib_at_ready,
                       release=base.release or other.release, host=base.host or other.host,
                       unit=base.unit or other.unit, flags_diff=base.flags_diff or other.flags_diff,
                       recorded_at=max(self.recorded_at, newer.recorded_at))


#: how far a view of a run saw it get: a watcher that came late may never see a ready run ready (a restart stops
#: it before its first probe), and its view must not unmake the ready another watcher saw
_REACHED = {RunEnd.UNDER_WAY: 0, RunEnd.STALLED: 0, RunEnd.STOPPED: 1, RunEnd.READY: 2, RunEnd.FAILED: 3}


def _fullness(r: RunRecord) -> tuple[int, int, float]:
    """The view that saw the run get furthest; then the longer timeline; then the later look."""
    last = r.timeline[-1].at + r.timeline[-1].seconds if r.timeline else 0.0
    return _REACHED[r.outcome], len(r.timeline), last


# ---------------------------------------------------------------- the file's form: JSON objects, one per run


def to_dict(r: RunRecord) -> dict[str, Any]:
    return {
        "invocation": r.invocation, "deployment": r.deployment, "started_at": r.started_at,
        "argv_hash": r.argv_hash, "argv": list(r.argv), "flags": dict(r.flags), "flags_diff": list(r.flags_diff),
        "timeline": [{"phase": str(s.phase), "at": s.at, "seconds": s.seconds} for s in r.timeline],
        "outcome": str(r.outcome),
        "failure": None if r.failure is None else {
            "phase": str(r.failure.phase), "kind": r.failure.kind, "hint": r.failure.hint,
            "excerpt": list(r.failure.excerpt)},
        "gpu_mib_at_ready": r.gpu_mib_at_ready, "release": r.release, "host": r.host, "unit": r.unit,
        "gpu_steps": [{"at": s.at, "step": s.step, "used_mib": s.used_mib, "this_run_mib": s.this_run_mib,
                       "previous_run_mib": s.previous_run_mib, "other_mib": s.other_mib} for s in r.gpu_steps],
        "actions": [{"at": a.at, "who": a.who, "action": a.action, "change": a.change} for a in r.actions],
        "recorded_at": r.recorded_at,
        "stalled_since": r.stalled_since, "last_line": r.last_line,
    }


def _num(v: Any) -> float | None:
    """A MiB figure as stored: a finite number in range, else not known."""
    return real_or_none(v, low=0.0, high=MAX_COUNT)


def _list(v: Any, what: str) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError(f"{what}: not a list")
    return v


def from_dict(d: Mapping[str, Any]) -> RunRecord:
    """A record as stored, its numbers taken as numbers from outside are (tui/guard/numbers.py); raises
    KeyError/ValueError/TypeError (BadNumber is a ValueError) on one that is not (the store skips it)."""
    if not isinstance(d, Mapping):
        raise TypeError("a record is not an object")
    f = d.get("failure")
    flags = d.get("flags", {})
    if not isinstance(flags, Mapping):
        raise TypeError("flags: not an object")
    return bounded(RunRecord(
        invocation=str(d["invocation"]), deployment=str(d["deployment"]),
        started_at=epoch(d["started_at"], "started_at"),
        argv_hash=str(d["argv_hash"]), argv=tuple(str(a) for a in _list(d.get("argv", []), "argv")),
        flags=tuple((str(k), None if v is None else str(v)) for k, v in flags.items()),
        flags_diff=tuple(str(x) for x in _list(d.get("flags_diff", []), "flags_diff")),
        timeline=tuple(Span(Phase(s["phase"]), epoch(s["at"], "timeline at"), seconds(s["seconds"], "timeline seconds"))
                       for s in _list(d.get("timeline", []), "timeline")),
        outcome=RunEnd(d.get("outcome", RunEnd.UNDER_WAY)),
        failure=None if not f else FailureRecord(Phase(f["phase"]), str(f["kind"]), str(f.get("hint", "")),
                                                 tuple(str(x) for x in _list(f.get("excerpt", []), "excerpt"))),
        gpu_mib_at_ready=_num(d.get("gpu_mib_at_ready")), release=str(d.get("release") or ""),
        host=str(d.get("host") or ""), unit=str(d.get("unit") or ""),
        gpu_steps=tuple(GpuStep(epoch(s["at"], "gpu step at"), str(s["step"]), _num(s.get("used_mib")),
                                _num(s.get("this_run_mib")), _num(s.get("previous_run_mib")),
                                _num(s.get("other_mib")))
                        for s in _list(d.get("gpu_steps", []), "gpu_steps")),
        actions=tuple(ActionRecord(epoch(a["at"], "action at"), str(a["who"]), str(a["action"]),
                                   str(a.get("change", "")))
                      for a in _list(d.get("actions", []), "actions")),
        recorded_at=epoch(d.get("recorded_at", 0.0), "recorded_at"),
        stalled_since=real_or_none(d.get("stalled_since"), low=0.0, high=4e9), last_line=str(d.get("last_line") or ""),
    ))


def checked(r: RunRecord) -> RunRecord:
    """`r` as it will read back: its numbers as a reader takes them; raises BadNumber on one that is not (a moment
    of infinity, a negative duration), so that such a record is never written."""
    return from_dict(to_dict(r))


def size_of(r: RunRecord) -> int:
    """The record's bytes in the file."""
    return len(json.dumps(to_dict(r), ensure_ascii=False).encode("utf-8", "replace"))


def _cut_line(line: str) -> str:
    if len(line) <= MAX_EXCERPT_LINE:
        return line
    return line[:MAX_EXCERPT_LINE] + f" [bringup: {len(line) - MAX_EXCERPT_LINE} more characters not kept]"


def bounded(r: RunRecord, limit: int = MAX_RECORD_BYTES) -> RunRecord:
    """`r` within `limit` bytes of JSON: each excerpt line cut to MAX_EXCERPT_LINE, then the excerpt's first lines
    left out (a mark says how many), then the older GPU steps and actions, then the command line's long words."""
    f = r.failure
    if f is not None and any(len(x) > MAX_EXCERPT_LINE for x in f.excerpt):
        f = replace(f, excerpt=tuple(_cut_line(x) for x in f.excerpt))
        r = replace(r, failure=f)
    size = size_of(r)
    if size <= limit:
        return r
    if f is not None and f.excerpt:
        over = size - limit + 120  # the mark's own bytes
        lines = list(f.excerpt)
        dropped = 0
        while lines and over > 0:
            over -= len(json.dumps(lines.pop(0), ensure_ascii=False).encode("utf-8", "replace")) + 2
            dropped += 1
        mark = f"[bringup: {dropped} earlier lines of this excerpt not kept: a record is kept within {limit} bytes]"
        r = replace(r, failure=replace(f, excerpt=(mark, *lines)))
        size = size_of(r)
    while size > limit and (r.gpu_steps or r.actions):
        r = replace(r, gpu_steps=r.gpu_steps[len(r.gpu_steps) // 2 + 1:] if r.gpu_steps else (),
                    actions=r.actions[len(r.actions) // 2 + 1:] if r.actions else ())
        size = size_of(r)
    if size > limit:
        short = tuple(a if len(a) <= 256 else a[:256] + "..." for a in r.argv)
        r = replace(r, argv=short, flags=tuple((k, v if v is None or len(v) <= 256 else v[:256] + "...")
                                               for k, v in r.flags))
        if size_of(r) > limit:
            r = replace(r, argv=(), flags=(), flags_diff=(),
                        failure=None if r.failure is None else replace(r.failure, hint=r.failure.hint[:256],
                                                                       excerpt=r.failure.excerpt[-20:]))
    return r


def read_records(items: Iterable[Any]) -> tuple[list[RunRecord], tuple[str, ...]]:
    """The records of a file's objects, and a note for each that could not be read (a newer bringup's, a hand
    edit, a number that is none): skipped, never a crash."""
    out: list[RunRecord] = []
    notes: list[str] = []
    for i, d in enumerate(items):
        try:
            out.append(from_dict(d))
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            name = d.get("invocation") if isinstance(d, Mapping) else None
            which = f"run {str(name)[:12]}" if name else f"record {i + 1}"
            why = f"no {e}" if isinstance(e, KeyError) else str(e) or type(e).__name__
            notes.append(f"{which} skipped: {why}"[:200])
    return out, tuple(notes)


def readable(items: Iterable[Any]) -> list[RunRecord]:
    """The records of a file's objects, skipping any that cannot be read (`read_records`, without the notes)."""
    return read_records(items)[0]
