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

from tui.lifecycle.secrets import redact_text
from tui.model import LockInfo

if TYPE_CHECKING:
    from tui.managers import AsyncLock


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
    """A holder's record as written by `LockInfo`; None for an empty, cleared or foreign one."""
    try:
        raw = json.loads(data or b"{}")
        if not isinstance(raw, dict) or not raw.get("who"):
            return None
        return LockInfo(who=str(raw["who"]), pid=int(raw.get("pid") or 0), since=float(raw.get("since") or 0),
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
