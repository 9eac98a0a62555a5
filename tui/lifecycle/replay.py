"""Replay a recorded log through the same reducer the console uses.

Accepts plain server output, journald short format, and `journalctl -o json` lines (one JSON object per line,
MESSAGE possibly a byte array; a record cut short is kept, saying so), mixed freely. systemd's own messages
(`UNIT: Main process exited, ...`, `Started ...`, `Stopping ...`, `UNIT: Scheduled restart job, ...`), in a JSON
journal or as text, become unit events, so a replay sees "the process exited" exactly as the live console would.
Every line's text goes through `lines.clean`, which makes it safe for a terminal, before a replay shows it.

A replay streams: the lines are read once, as they come (the first 2,000 held to tell the server and the first
time), so a log of any size replays in bounded memory. A line that starts like a JSON record but is nested deeper
than Python's parser goes is read as text, never an error. `binary_kind` tells a file that is no log (an
executable, a compressed or journald file, binary data) from a log with a stray NUL in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain, islice

from tui.guard.numbers import epoch_or_none, whole_or_none
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
        status = whole_or_none(status_s, text=True)
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


#: the lines held at the start of a replay: the server is told, and the first time read, from these
HEAD_LINES = 2000


def _first_stamp(lines: list[str], within: int = HEAD_LINES) -> float:
    """The first time a line of the log states (its prefix), or 0.0 when none of the first lines has one."""
    for raw in lines[:within]:
        stored = _STORED.match(raw)
        if stored and (at := epoch_or_none(stored[1])) is not None:
            return at
        for piece in split_output(raw):
            ts = clean(piece).ts
            if ts is not None:
                return ts
    return 0.0


def events_from_lines(lines: Iterable[str]) -> Iterator[Event]:
    """Events from recorded lines. Timestamps come from the lines' own prefixes where they have one; lines
    without one inherit the previous line's time (a traceback happens at the time of its first line); lines
    before the first stamped one take its time (an NCCL banner, uvicorn's `INFO:` lines), not their line number,
    which a later stamp would turn into a phase lasting 55 years. The lines are read once, as they come."""
    it = iter(lines)
    head = list(islice(it, HEAD_LINES))
    last = _first_stamp(head)
    runs = _Runs()
    for i, raw in enumerate(chain(head, it)):
        raw = raw.rstrip("\n")
        if not raw.strip() or raw.startswith("# source:") or raw.startswith("# server:"):
            continue
        if raw.lstrip().startswith("{"):
            record = _record_events(raw, last)
            if record is not None:
                for ev in record:
                    last = max(last, ev.at)
                    yield ev
                continue
        # bringup's own log of a `process` deployment: each line as the supervisor stamped it
        stored = _STORED.match(raw)
        at = epoch_or_none(stored[1]) if stored else None
        if stored and at is not None:
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
                last = i * 1.0  # the line's number
            u = _systemd_event(c, last, runs)
            yield u if u is not None else LogLine(at=last, text=piece)


def _record_events(raw: str, last: float) -> list[Event] | None:
    """The events of a line of `journalctl -o json` (a record cut short is still one, saying so), or None when the
    line is no record, or one nested deeper than Python's JSON parser goes (`{"a": {"a": ...}}` 100,000 deep):
    that line is read as text."""
    try:
        obj = parse_record(raw)
        return None if obj is None else list(_journal_events(obj, last))
    except RecursionError:
        return None


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
    #: whether any line was the server's output (`server_line`): replaying the wrong file must say so
    recognised: bool = True

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


def server_line(ev: Event, p: Preset) -> bool:
    """Whether an event of a recorded log is the server's output: a logger prefix, a phase marker, the ready line,
    a fatal line, or systemd's word about the unit (any event but a line)."""
    if isinstance(ev, FlagsKnown):
        return False
    if not isinstance(ev, LogLine):
        return True
    c = clean(ev.text)
    t = c.text
    return bool(c.prefixed or p.ready.search(t) or p.fatal.search(t) or (p.serving is not None and p.serving.search(t))
                or any(m.pattern.search(t) for m in p.markers))


def replay(lines: Iterable[str], preset_name: str = "auto") -> ReplayResult:
    """The reducer's state at the end of a recorded log, read once and line by line (bounded memory)."""
    it = iter(lines)
    head = list(islice(it, HEAD_LINES))
    name = detect_preset(head) if preset_name == "auto" else preset_name
    preset: Preset = get_preset(name)
    state = initial(require_probe=False)
    recognised = False
    for ev in with_flags(events_from_lines(chain(head, it))):
        state = reduce(state, ev, preset)
        recognised = recognised or server_line(ev, preset)
    return ReplayResult(log_ended(state), name, recognised)


#: the starts of files that are no log, and what to say of each
_MAGIC = {
    b"\x7fELF": "a binary file (an executable), not a server log",
    b"\x1f\x8b": "a binary file (gzip-compressed): `zcat FILE | bringup replay -`",
    b"\x28\xb5\x2f\xfd": "a binary file (zstd-compressed): `zstdcat FILE | bringup replay -`",
    b"\xfd7zXZ\x00": "a binary file (xz-compressed): `xzcat FILE | bringup replay -`",
    b"PK\x03\x04": "a binary file (a zip archive), not a server log",
    b"LPKSHHRH": "a binary file (journald's own): `journalctl --file FILE -o json | bringup replay -`",
}
#: the bytes no text log has (C0 controls other than tab, newlines, form feed, backspace and ESC: a log's colours)
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\x0c\x08\x1b")
#: the share of such bytes at the start of a file above which it is binary: one stray NUL (a crashed writer's
#: padding, a partial write) in a real log is far below it, and random bytes (26 of 256 values: about 10 %) far above
BINARY_SHARE = 0.05
#: ... or of those and bytes that are no UTF-8 together (random bytes: most of them; a log in Latin-1: its accents)
UNREADABLE_SHARE = 0.30


def binary_kind(head: bytes) -> str | None:
    """What a file that is no text log is, from its first bytes (8 KiB is plenty): a known magic number, or more than
    BINARY_SHARE of control bytes; None for a text log, stray NULs and undecodable bytes included."""
    for magic, what in _MAGIC.items():
        if head.startswith(magic):
            return what
    if not head:
        return None
    controls = len(head) - len(head.translate(None, _CONTROL))
    undecodable = head.decode("utf-8", errors="replace").count("\ufffd")
    binary = controls / len(head) > BINARY_SHARE or (controls + undecodable) / len(head) > UNREADABLE_SHARE
    return "a binary file, not a server log" if binary else None
