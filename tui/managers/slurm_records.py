"""bringup's records of a Slurm deployment on the cluster's login host, and its lock: the operator's own, no root.

Under the SSH user's home (`.local/state/bringup/deployments/NAME`, made 0700 the guarded way: remote_dir.py): the job
submitted last and what it ran (`job.json`, its ended line kept once it ends, for when Slurm has forgotten it), a stop
bringup asked (`cancel.json`: any bringup watching reads that job's CANCELLED as a stop, not a cancel by someone
else), the command line of the next job and the previous and last ready ones (`argv*.json`), and the lock, flock(1)
on `restart.lock` (remote_lock.py). The job's output directory on the shared filesystem is made here too (0700).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tui.errors import PermanentError
from tui.guard.files import UnsafeLocation, private_dir, write_private
from tui.managers import AsyncLock, ManagerError, PermanentManagerError
from tui.managers.file_lock import FileLock
from tui.managers.remote_lock import RemoteLock
from tui.transport import Transport, TransportError
from tui.transport.remote_dir import private_dir as remote_private_dir


class Records:
    def __init__(self, transport: Transport, path: str, log_dir: str) -> None:
        self.transport = transport
        self.path = path
        self.log_dir = log_dir
        self._made: set[str] = set()

    def p(self, name: str) -> str:
        return f"{self.path}/{name}"

    async def read(self, name: str) -> Any:
        """A record's JSON; None when it is not there or not whole."""
        data = await self.transport.read_file(self.p(name))
        try:
            return json.loads(data) if data else None
        except ValueError:
            return None

    async def make_dirs(self, *, output: bool = False) -> None:
        """The records' directory (and with `output`, the job's output directory), through the guarded places:
        made (0700), or refused with why (one another user could have planted)."""
        for path in (self.path, self.log_dir) if output else (self.path,):
            if path in self._made:
                continue
            try:
                if self.transport.name == "local":
                    await asyncio.to_thread(private_dir, path)
                else:
                    await remote_private_dir(self.transport, path)
            except (UnsafeLocation, PermanentError) as e:
                raise PermanentManagerError(f"{self.transport.name}: {e}") from None
            except TransportError as e:
                raise ManagerError(f"{self.transport.name}: cannot make {path}: {e}") from None
            self._made.add(path)

    async def write(self, name: str, value: Any) -> None:
        """A record, 0600: here through guard/files.py, on the login host through the transport's guarded write."""
        await self.make_dirs()
        data = json.dumps(value).encode()
        if self.transport.name == "local":
            try:
                await asyncio.to_thread(write_private, self.p(name), data)
            except OSError as e:
                raise ManagerError(f"cannot write {self.p(name)}: {e.strerror or e}") from None
            return
        await self.transport.write_file(self.p(name), data)

    def lock(self, purpose: str, change: str = "") -> AsyncLock:
        if self.transport.name == "local":  # bringup on the login host itself
            return FileLock(self.p("restart.lock"), purpose, change)
        return _RecordsLock(self, purpose, change)


class _RecordsLock(RemoteLock):
    """The lock in the records' directory, the directory made first (flock(1) opens the file in it)."""

    def __init__(self, records: Records, purpose: str, change: str) -> None:
        super().__init__(records.transport, records.p("restart.lock"), purpose, change)
        self._records = records

    async def __aenter__(self) -> Any:
        await self._records.make_dirs()
        return await super().__aenter__()

    async def holder(self) -> Any:
        await self._records.make_dirs()
        return await super().holder()
