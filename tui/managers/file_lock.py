"""The lock of a deployment whose server runs on this machine (the `process` manager): no host to ask, so the
kernel's flock(2) is the whole proof of who holds it.

The file is opened through tui/guard/files.py's `open_private` (a symbolic or hard link put at its path is refused,
never written through; its directory must be ours and closed to others) and kept 0600: no other user can open it,
hence none can hold it. A lock held by something that is no bringup is named by
its pid and user (from /proc/locks and /proc/PID/fdinfo), not taken for a bringup that left no record.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import json
import os
from pathlib import Path

from tui.guard.files import UnsafeLocation, open_private
from tui.guard.numbers import whole_or_none
from tui.guard.text import split_lines
from tui.managers import LockHeld, LockInfo, PermanentManagerError, refusal
from tui.managers.lock_record import lock_info_from, new_record


class FileLock:
    """flock(2) on a file on this host; the holder's identity is written into the file for the refusal message.

    The kernel releases it when the holder exits, even on SIGKILL, so a crashed bringup never leaves it stuck; and
    while we live, nothing can take it from us (it is never lost, unlike the remote one).
    """

    def __init__(self, path: str, purpose: str, change: str = "") -> None:
        self.path = path
        self.purpose = purpose
        self.change = change
        self._fd: int | None = None
        self.info: LockInfo | None = None

    async def __aenter__(self) -> LockInfo:
        try:  # 0600 in a 0700 directory made where missing, no link (symbolic or hard) followed, ours alone
            fd = open_private(self.path, os.O_RDWR | os.O_NONBLOCK)
        except UnsafeLocation as e:  # not someone else's lock: ours cannot be had at all
            raise PermanentManagerError(f"cannot use the lock: {e}") from None
        except OSError as e:
            raise PermanentManagerError(f"cannot open the lock {self.path}: {e.strerror or e}") from None
        st = os.fstat(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_info_from(os.pread(fd, 4096, 0))
            os.close(fd)
            raise await asyncio.to_thread(_refusal, self.path, st, holder) from None
        info = new_record(self.purpose, self.change)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(dataclasses.asdict(info)).encode(), 0)
        self._fd, self.info = fd, info
        return info

    async def still_held(self) -> bool:
        return self._fd is not None

    async def retake(self) -> LockInfo:
        await self.__aexit__()
        return await self.__aenter__()

    async def holder(self) -> LockInfo | None:
        """The record names a live process of this host (the lock is local), or it is a dead holder's leftover."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            info = lock_info_from(os.pread(fd, 4096, 0))
        except OSError:
            return None
        finally:
            os.close(fd)
        if info is None or info.pid <= 0:
            return None
        try:
            os.kill(info.pid, 0)
        except ProcessLookupError:
            return None
        except (PermissionError, OverflowError):
            pass
        return info

    async def note(self, step: str) -> None:
        if self._fd is None or self.info is None:
            return
        data = json.dumps(dataclasses.asdict(dataclasses.replace(self.info, step=step))).encode()
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)

    async def __aexit__(self, *exc: object) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def lock_holders(st: os.stat_result) -> list[int]:
    """The processes that hold a flock on the file `st` describes: those whose open file carries it
    (/proc/PID/fdinfo), else the locker /proc/locks names (0 there once it is gone)."""
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    found: list[int] = []
    with contextlib.suppress(OSError):
        for pid in sorted(n for p in os.listdir("/proc") if (n := whole_or_none(p, low=1, text=True)) is not None):
            try:
                fds = os.listdir(f"/proc/{pid}/fdinfo")
            except OSError:
                continue
            for fd in fds:
                try:
                    with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as f:
                        text = f.read()
                except OSError:
                    continue
                if any(ln.split()[1:2] == ["FLOCK"] and f" {key} " in ln for ln in split_lines(text)
                       if ln.startswith("lock:")):
                    found.append(pid)
                    break
    if found:
        return found
    with contextlib.suppress(OSError), open("/proc/locks", encoding="ascii", errors="replace") as f:
        for ln in f:
            parts = ln.split()
            if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == key \
                    and (holder := whole_or_none(parts[4], low=1, text=True)) is not None:
                return [holder]
    return []


def _refusal(path: str, st: os.stat_result, holder: LockInfo | None) -> LockHeld:
    """A busy lock: the bringup whose record names a process holding it, else that process, by pid and user."""
    pids = lock_holders(st)
    if holder is not None and (not pids or holder.pid in pids):
        return refusal(holder)
    if not pids:
        return refusal(None)
    pid = pids[0]
    try:
        user = Path(f"/proc/{pid}").owner()
    except (OSError, KeyError):
        user = "?"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = "?"
    named = f"; its record names {holder.describe()}" if holder is not None else "; it left no record"
    return LockHeld(f"the lock {path} is held by pid {pid} (user {user}: {command[:200]}), which is not a "
                    f"bringup{named}")
