"""Replay a recorded log through the same reducer the console uses.

Accepts plain server output, journald short format, and `journalctl -o json` lines (one JSON object per line,
MESSAGE possibly a byte array; a record cut short is kept, saying so), mixed freely. systemd's own messages
(`UNIT: Main process exited, ...`, `Started ...`, `Stopping ...`, `UNIT: Scheduled restart job, ...`), in a JSON
journal or as text, become unit events, so a replay sees "the process exited" exactly as the live console would.
Every line's text goes through `lines.clean`, which makes it safe for a terminal, before a replay shows it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from tui.lifecycle.journal import parse_entry, parse_record
from tui.lifecycle.lines import CleanLine, clean, split_output
from tui.lifecycle.presets import Preset, get_preset
from tui.lifecycle.presets.registry import PRESETS
from tui.lifecycle.reducer import LifecycleState, initial, log_ended, reduce
from tui.lifecycle.server_args import argv_from_line
from tui.model import Event, FlagsKnown, LogLine, UnitObserved, UnitState

_SYSTEMD_EXIT = re.compile(r"Main process exited, code=(?P<code>\w+), status=(?P<status>[^/\s]+)(?:/(?P<name>\w+))?")
_SYSTEMD_FAILED = re.compile(r"Failed with result '(?P<result>[^']+)'")
#: systemd's words about a unit, by what they say happened (the unit's name, where it leads the message, is
#: `NAME.service: `; `Started`/`Starting`/`Stopping`/`Stopped` name the unit or its description)
_SYSTEMD_UNIT = re.compile(r"^[\w@.:\\-]+\.(?:service|scope): ")
_SYSTEMD_RESTART = re.compile(r"Scheduled restart job\b")
_SYSTEMD_DEACTIVATED = re.compile(r"Deactivated successfully")
_SYSTEMD_VERB = re.compile(r"^(?P<verb>Starting|Started|Stopping|Stopped) \S")
_SYSTEMD_OTHER = re.compile(r"\.(?:timer|socket|slice|mount|target|path|device|swap|scope)\b|Session \d+ of [Uu]ser|"
                            r"User Manager for|user@\d+")
#: signals after which systemd calls a service's end clean (SuccessExitStatus's defaults)
_CLEAN_SIGNALS = {"HUP", "INT", "TERM", "PIPE"}


def systemd_unit_state(text: str, at: float, invocation: str = "") -> UnitState | None:
    """The unit's state that one of systemd's own messages reports, or None when it reports none."""
    m = _SYSTEMD_EXIT.search(text)
    if m:
        status_s = m["status"]
        status = int(status_s) if status_s.lstrip("-").isdigit() else None
        if m["code"] == "exited":
            clean_end = status == 0
        else:  # killed or dumped: status is the signal
            clean_end = (m["name"] or "") in _CLEAN_SIGNALS
            status = -status if status is not None else None
        return UnitState(active="inactive" if clean_end else "failed", sub="dead" if clean_end else "exited",
                         invocation=invocation, exit_status=status, exited_at=at)
    if _SYSTEMD_FAILED.search(text):
        return UnitState(active="failed", sub="failed", invocation=invocation, exited_at=at)
    if _SYSTEMD_DEACTIVATED.search(text):
        return UnitState(active="inactive", sub="dead", invocation=invocation, exited_at=at)
    if _SYSTEMD_RESTART.search(text):
        return UnitState(active="activating", sub="auto-restart", invocation=invocation, started_at=at)
    m = _SYSTEMD_VERB.match(text)
    if m:
        verb = m["verb"]
        if verb == "Starting":
            return UnitState(active="activating", sub="start", invocation=invocation, started_at=at)
        if verb == "Started":
            return UnitState(active="active", sub="running", invocation=invocation, started_at=at)
        if verb == "Stopping":
            return UnitState(active="deactivating", sub="stop-sigterm", invocation=invocation)
        return UnitState(active="inactive", sub="dead", invocation=invocation, exited_at=at)
    return None


def _is_systemd_text(c: CleanLine) -> bool:
    """A text line in which systemd itself speaks: journald names it, or the message names a unit."""
    if c.prefixed:
        return False
    if c.ident:
        return c.ident == "systemd"
    t = c.text
    return bool(_SYSTEMD_UNIT.match(t)) or (bool(_SYSTEMD_VERB.match(t)) and ".service" in t)


def _about_another_unit(text: str) -> bool:
    """systemd's start/stop words about something else (a login session, a timer): `journalctl` without `-u`."""
    return bool(_SYSTEMD_OTHER.search(text)) and not _SYSTEMD_UNIT.match(text)


def _systemd_event(c: CleanLine, at: float, runs: _Runs) -> UnitObserved | None:
    """The unit event a text line of systemd's reports; None for any other line (a server's line, or systemd's
    words about another unit: a login session, a timer)."""
    if not _is_systemd_text(c):
        return None
    u = None if _about_another_unit(c.text) else systemd_unit_state(c.text, at)
    return None if u is None else UnitObserved(at, replace(u, invocation=runs.invocation(u)))


class _Runs:
    """Invocations for systemd's text lines, which carry no InvocationID: a start (or a scheduled restart, and the
    start that follows it) begins a new run."""

    def __init__(self) -> None:
        self.n = 0
        self.starting = False

    def invocation(self, u: UnitState) -> str:
        if u.running:
            if not self.starting:
                self.n += 1
            self.starting = u.active == "activating"
        else:
            self.starting = False
        return f"systemd-run-{self.n}" if self.n else ""


def _journal_events(obj: dict[str, object], seq: float) -> Iterator[Event]:
    e = parse_entry(obj)
    at = e.at if e.at is not None else seq
    text, inv = e.text, e.invocation
    if e.from_systemd:
        u = systemd_unit_state(text, at, e.unit_invocation)
        # a run starts with its own InvocationID (`Started`); without one a start cannot be told from the last run
        if u is not None and (not u.running or (u.active == "active" and e.unit_invocation)):
            yield UnitObserved(at, u)
        return
    for piece in split_output(text):
        yield LogLine(at=at, text=piece, invocation=inv)  # a replay never resumes: no cursor


#: `<epoch seconds> <line>`: how the supervisor of a `process` deployment writes its server's output
_STORED = re.compile(r"^(1[5-9]\d{8}(?:\.\d+)?) (.*)$")


def _first_stamp(lines: list[str], within: int = 2000) -> float:
    """The first time a line of the log states (its prefix), or 0.0 when none of the first lines has one."""
    for raw in lines[:within]:
        stored = _STORED.match(raw)
        if stored:
            return float(stored[1])
        for piece in split_output(raw):
            ts = clean(piece).ts
            if ts is not None:
                return ts
    return 0.0


def events_from_lines(lines: Iterable[str]) -> Iterator[Event]:
    """Events from recorded lines. Timestamps come from the lines' own prefixes where they have one; lines
    without one inherit the previous line's time (a traceback happens at the time of its first line); lines
    before the first stamped one take its time (an NCCL banner, uvicorn's `INFO:` lines), not their line number,
    which a later stamp would turn into a phase lasting 55 years."""
    lines = list(lines)
    last = _first_stamp(lines)
    runs = _Runs()
    for i, raw in enumerate(lines):
        raw = raw.rstrip("\n")
        if not raw.strip() or raw.startswith("# source:") or raw.startswith("# server:"):
            continue
        if raw.lstrip().startswith("{"):
            obj = parse_record(raw)  # a record cut short is still one (saying so), not text
            if obj is not None:
                for ev in _journal_events(obj, last):
                    last = max(last, ev.at)
                    yield ev
                continue
        stored = _STORED.match(raw)
        if stored:  # bringup's own log of a `process` deployment: each line as the supervisor stamped it
            at = float(stored[1])
            last = at if at >= last else last
            for piece in split_output(stored[2]):
                u = _systemd_event(clean(piece), last, runs) if "systemd" in piece or ".service" in piece else None
                yield u if u is not None else LogLine(at=last, text=piece)
            continue
        for piece in split_output(raw):
            c = clean(piece)
            ts = c.ts
            if ts is not None and ts >= last - 86400 * 180:
                last = ts if last == 0.0 or ts >= last else last
            elif last == 0.0:
                last = float(i)
            u = _systemd_event(c, last, runs)
            yield u if u is not None else LogLine(at=last, text=piece)


def detect_preset(lines: Iterable[str]) -> str:
    """The name of the registered preset whose `detection` finds the most of the first 2,000 lines (the first
    registered on a tie, or when none finds any)."""
    presets = list(PRESETS.values())
    hits = [0] * len(presets)
    for n, line in enumerate(lines):
        for i, p in enumerate(presets):
            hits[i] += bool(p.detection is not None and p.detection.search(line))
        if n > 2000:
            break
    return presets[max(range(len(presets)), key=lambda i: (hits[i], -i))].name


@dataclass(frozen=True, slots=True)
class ReplayResult:
    state: LifecycleState
    preset: str

    def as_dict(self) -> dict[str, object]:
        s = self.state
        return {
            "final": str(s.phase),
            "phases": [{"phase": str(t.phase), "at": t.at, "line": t.line} for t in s.timeline],
            "failure": s.failure.as_dict() if s.failure else None,
            "preset": self.preset,
            "flags": s.flag_dict(),
            # the release the log states (vLLM's start-up line), never guessed: null when it says none
            "release": s.release.version if s.release is not None else None,
        }


def with_flags(events: Iterable[Event]) -> Iterator[Event]:
    """The events, each server start-up arguments line (SGLang's `server_args=ServerArgs(...)`, vLLM's
    `non-default args: {...}`) preceded by the flags it names: a recorded log has no unit to read the command line
    from, and a failure's hint depends on it (DFLASH + CUDA graphs) as it does live."""
    for ev in events:
        if isinstance(ev, LogLine) and "args" in ev.text:
            argv = argv_from_line(clean(ev.text).text)
            if argv:
                yield FlagsKnown(ev.at, argv)
        yield ev


def replay(lines: list[str], preset_name: str = "auto") -> ReplayResult:
    name = detect_preset(lines) if preset_name == "auto" else preset_name
    preset: Preset = get_preset(name)
    state = initial(require_probe=False)
    for ev in with_flags(events_from_lines(lines)):
        state = reduce(state, ev, preset)
    return ReplayResult(log_ended(state), name)
