"""The lock of a deployment whose server runs on this machine (the `process` manager): no host to ask, so the
kernel's flock(2) is the whole proof of who holds it."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
from pathlib import Path

from tui.managers import LockInfo, PermanentError, refusal
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
        with contextlib.suppress(OSError):
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:  # not someone else's lock: ours cannot be had at all
            raise PermanentError(f"cannot open the lock {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_info_from(os.pread(fd, 4096, 0))
            os.close(fd)
            raise refusal(holder) from None
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
            with open(self.path, "rb") as f:
                info = lock_info_from(f.read(4096))
        except OSError:
            return None
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
