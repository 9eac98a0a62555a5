"""journald's JSON entries (`journalctl -o json`), read one way for the live follow and for `bringup replay`.

A record is one line, and it can be long: one ESC byte (a coloured traceback line) makes journald send MESSAGE as
an array of byte values, about four times the text, so a 20 KB line is an 81 KB record. The transports deliver a
line of up to 4 MiB whole (`MAX_RECORD`); a longer one arrives cut, and `parse_record` still makes it a record:
what identifies it (cursor, time, invocation) as far as it arrived, the part of MESSAGE that arrived, and a marker
saying it was cut, so that no entry is dropped silently. MESSAGE is cut after parsing, to `MAX_MESSAGE` characters,
with a marker that says how much was left out (`JournalEntry.cut` says that it was).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tui.guard.numbers import epoch, whole, whole_or_none

#: the longest MESSAGE kept, in characters: the bound the transports (tui/transport/lines.py) and the process
#: supervisor (tui/managers/supervisor.py) put on a line of a server's output. (The domain imports no transport.)
MAX_MESSAGE = 65_536
#: the longest line the transports deliver whole (tui/transport/local.py, STREAM_MAX_LINE): a record this long or
#: longer that does not parse was cut on the way
MAX_RECORD = 4 * 1024 * 1024
#: the key `parse_record` gives a record it rebuilt from a cut line: how many bytes of it arrived
CUT_KEY = "__BRINGUP_CUT_AT"


@dataclass(frozen=True, slots=True)
class JournalEntry:
    at: float | None  # __REALTIME_TIMESTAMP in seconds; None when the entry has none that parses
    text: str
    #: the run that printed it (_SYSTEMD_INVOCATION_ID); empty for systemd's own messages about the unit
    invocation: str
    cursor: str
    #: systemd itself speaks (PID 1): its messages about the unit carry the run in INVOCATION_ID instead
    from_systemd: bool
    unit_invocation: str
    #: part of the message is not in `text` (longer than MAX_MESSAGE, or the record was cut on the way): `text`
    #: ends with a marker that says so
    cut: bool = False


def journal_message(obj: dict[str, Any]) -> str:
    """MESSAGE as text: journald sends non-UTF-8 messages, and messages with control characters, as arrays of
    byte values."""
    msg = obj.get("MESSAGE", "")
    if isinstance(msg, list):
        try:
            return bytes(whole(b, "a byte of MESSAGE", low=0, high=255) for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return ""
    return msg if isinstance(msg, str) else "" if msg is None else str(msg)


def cut_message(text: str, limit: int = MAX_MESSAGE) -> tuple[str, bool]:
    """`text` cut to `limit` characters, with a marker that says how many were left out; and whether it was."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]} …[{len(text) - limit:,} characters of this journal entry cut]", True


def parse_entry(obj: dict[str, Any]) -> JournalEntry:
    try:
        at: float | None = epoch(whole(obj.get("__REALTIME_TIMESTAMP", ""), "__REALTIME_TIMESTAMP", low=0,
                                       text=True) / 1e6, "__REALTIME_TIMESTAMP")
    except ValueError:
        at = None
    inv = str(obj.get("_SYSTEMD_INVOCATION_ID") or "")
    text, cut = cut_message(journal_message(obj))
    arrived = obj.get(CUT_KEY)
    if isinstance(arrived, int):
        text = (text + " " if text else "") + f"…[a journal entry of more than {arrived:,} bytes was cut]"
        cut = True
    return JournalEntry(at=at, text=text, invocation=inv, cursor=str(obj.get("__CURSOR") or ""),
                        from_systemd=not inv and (obj.get("_PID") == "1" or obj.get("SYSLOG_IDENTIFIER") == "systemd"),
                        unit_invocation=str(obj.get("INVOCATION_ID") or ""), cut=cut)


#: a string field of a record at the top level (after `{` or `,`: inside a JSON string a quote is escaped), whole
_FIELD = re.compile(r'[{,]\s*"(__CURSOR|__REALTIME_TIMESTAMP|_SYSTEMD_INVOCATION_ID|INVOCATION_ID|_PID|'
                    r'SYSLOG_IDENTIFIER)"\s*:\s*"((?:[^"\\]|\\.)*)"')
#: where MESSAGE begins: a string, or an array of byte values
_MESSAGE = re.compile(r'[{,]\s*"MESSAGE"\s*:\s*(["\[])')
_STRING_PREFIX = re.compile(r'(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*')
_BYTES_PREFIX = re.compile(r"\s*(\d{1,3})\s*(?=[,\]])")


def _message_prefix(s: str) -> str | list[int] | None:
    """The part of MESSAGE that arrived in the cut record `s` (None: it did not begin before the cut)."""
    m = _MESSAGE.search(s)
    if m is None:
        return None
    if m[1] == '"':
        body = _STRING_PREFIX.match(s, m.end())
        assert body is not None  # it matches the empty string
        try:
            return str(json.loads(f'"{body[0]}"'))
        except ValueError:
            return ""
    values: list[int] = []
    pos = m.end()
    while (b := _BYTES_PREFIX.match(s, pos)) is not None:
        if (value := whole_or_none(b[1], low=0, high=255, text=True)) is None:
            break
        values.append(value)
        pos = b.end()
        if s[pos:pos + 1] != ",":
            break
        pos += 1
    return values


def parse_record(raw: str) -> dict[str, Any] | None:
    """One line of `journalctl -o json` as its record; None for a line that is none (`-- No entries --`, text, a
    JSON value that is not an object). A line that is the beginning of a record cut short (by the transport's bound
    on a line, or a file cut) is a record still, never dropped: the fields that identify it as far as they arrived
    (cursor, time, invocation), the part of MESSAGE that arrived, and `CUT_KEY` (`parse_entry` adds a marker to
    its text). A line that does not parse and names none of a record's fields is None."""
    s = raw.strip()
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        pass
    else:
        return obj if isinstance(obj, dict) else None
    fields: dict[str, Any] = {}
    for m in _FIELD.finditer(s):
        try:
            fields.setdefault(m[1], json.loads(f'"{m[2]}"'))
        except ValueError:
            continue
    msg = _message_prefix(s)
    if not fields and msg is None:
        return None
    fields["MESSAGE"] = msg if msg is not None else ""
    fields[CUT_KEY] = len(s.encode("utf-8", "replace"))
    return fields
