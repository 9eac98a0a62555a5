"""journald's JSON entries (`journalctl -o json`), read one way for the live follow and for `bringup replay`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


def journal_message(obj: dict[str, Any]) -> str:
    """MESSAGE as text: journald sends non-UTF-8 messages as arrays of byte values."""
    msg = obj.get("MESSAGE", "")
    if isinstance(msg, list):
        try:
            return bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return ""
    return msg if isinstance(msg, str) else "" if msg is None else str(msg)


def parse_entry(obj: dict[str, Any]) -> JournalEntry:
    try:
        at: float | None = int(str(obj.get("__REALTIME_TIMESTAMP", ""))) / 1e6
    except ValueError:
        at = None
    inv = str(obj.get("_SYSTEMD_INVOCATION_ID") or "")
    return JournalEntry(at=at, text=journal_message(obj), invocation=inv, cursor=str(obj.get("__CURSOR") or ""),
                        from_systemd=not inv and (obj.get("_PID") == "1" or obj.get("SYSLOG_IDENTIFIER") == "systemd"),
                        unit_invocation=str(obj.get("INVOCATION_ID") or ""))
