"""The lock's record: who holds a deployment's lock, written next to it by every kind of lock in the same form.

Each lock (flock on this host, flock on a remote one) writes and reads this record, and "is this holder me" is
answered here once, so that the engine (naming another operator's restart) and the restart protocol (naming who
took a deployment over) never compare users, hosts, pids or tokens themselves.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING

from tui.guard.numbers import EPOCH_MAX, EPOCH_MIN, real_or_none, whole_or_none
from tui.lifecycle.secrets import redact_text
from tui.model import LockInfo

if TYPE_CHECKING:
    from tui.managers import AsyncLock


#: the largest pid a record may name (Linux's PID_MAX_LIMIT, 2**22)
_PID_MAX = 1 << 22


def this_user_at_host() -> str:
    """The `who` of a record this process writes, and what a record of ours is recognised by."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def new_record(purpose: str, change: str = "") -> LockInfo:
    """The record of one taking of the lock by this process: a fresh token tells this taking from any later one.
    The change is recorded with secrets' values as `***`: the record is a file every user of the host may read,
    and other operators' consoles show it."""
    return LockInfo(who=this_user_at_host(), pid=os.getpid(), since=time.time(), purpose=purpose,
                    change=redact_text(change), token=uuid.uuid4().hex)


def lock_info_from(data: bytes | str | None) -> LockInfo | None:
    """A holder's record as written by `LockInfo`; None for an empty, cleared or foreign one. Its numbers are
    taken as every number from outside is (tui/guard/numbers.py: the file is another process's, on a host other
    users share): a pid or a moment that is none (`true`, `"-inf"`, a year past 2200) is absent, as in a record
    that names none (pid 0, since unknown: `LockInfo.describe` says `?`), and the holder is still named."""
    try:
        raw = json.loads(data or b"{}")
        if not isinstance(raw, dict) or not raw.get("who"):
            return None
        pid = whole_or_none(raw.get("pid"), low=0, high=_PID_MAX) or 0
        since = real_or_none(raw.get("since"), low=EPOCH_MIN, high=EPOCH_MAX) or 0.0
        return LockInfo(who=str(raw["who"]), pid=pid, since=since,
                        purpose=str(raw.get("purpose") or "?"), change=redact_text(str(raw.get("change") or "")),
                        token=str(raw.get("token") or ""), step=str(raw.get("step") or ""))
    except (ValueError, TypeError):
        return None


def is_this_process(holder: LockInfo) -> bool:
    """The holder is this very bringup (its own restart, whose steps it shows already): same pid, user and host."""
    return holder.pid == os.getpid() and holder.who == this_user_at_host()


def is_other_taking(holder: LockInfo | None, ours: LockInfo) -> bool:
    """The record is someone else's than the taking `ours` (a later one of our own process included)."""
    return holder is not None and holder.token != ours.token


async def other_holder(lock: AsyncLock) -> LockInfo | None:
    """Another bringup at work on the deployment: the live holder, unless it is this process."""
    holder = await lock.holder()
    return None if holder is None or is_this_process(holder) else holder
