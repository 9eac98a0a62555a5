"""The lock of a deployment on another host: flock(1) there, held by a command whose stdin we keep open.

It is released when we close that command, and also when our SSH connection dies, so it can be lost under a
running restart: `still_held` proves on the host that it is still ours, and `retake` takes it back. Who holds it
is in `PATH.owner`, the shared record (lock_record.py) plus the pid of the holding command on that host.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator

from tui.managers import LockInfo, ManagerError, PermanentError, refusal
from tui.managers.lock_record import lock_info_from, new_record
from tui.transport import Transport, TransportError


class RemoteLock:
    """flock(1) on the host, held as long as a command whose stdin we keep open runs.

    The command runs on a pty, so sshd hangs it up when our connection drops: the lock is then free for anyone.
    `still_held` proves ownership on the host itself (our token in the record, and the holding process alive), so
    a restart never runs a step on a lock it lost without knowing it."""

    def __init__(self, transport: Transport, path: str, purpose: str, change: str = "") -> None:
        self.transport = transport
        self.path = path
        self.purpose = purpose
        self.change = change
        self.info: LockInfo | None = None
        self._stream: AsyncIterator[str] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._lost = False

    async def __aenter__(self) -> LockInfo:
        return await self._take()

    async def _take(self) -> LockInfo:
        info = new_record(self.purpose, self.change)
        owner = json.dumps(dataclasses.asdict(info))[:-1]  # the holder's pid is added on the host: `$$`
        # flock -n: fail at once if held. While held, record who holds it, then block until our channel closes.
        # (opened for reading: a file of another user in the sticky /run/lock may not be opened to write)
        script = ('[ -e "$1" ] || : >>"$1" 2>/dev/null; exec 9<"$1" 2>/dev/null || { echo noopen; exit 3; }; '
                  'flock -n 9 || { echo busy; exit 75; }; '
                  'printf \'%s, "lock_pid": %s}\' "$2" "$$" > "$1.owner"; echo locked; exec sleep 2147483647')
        argv = ["sh", "-c", script, "bringup-lock", self.path, owner]
        stream = self.transport.stream(argv)
        first = ""
        try:
            async with asyncio.timeout(20):
                async for line in stream:
                    first = line.strip()
                    break
        except (TimeoutError, TransportError) as e:
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            if getattr(e, "permanent", False):
                raise
            raise ManagerError(f"could not take the lock on {self.transport.name}: {e}") from None
        if first != "locked":
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
            where = f"the lock {self.path} on {self.transport.name}"
            if not first:
                raise ManagerError(f"could not take {where}: the command ended without a word")
            if first != "busy":  # not someone else's lock: this one cannot be had at all
                raise PermanentError(f"cannot take {where}: {first}")
            raise refusal(await self.holder())
        self._stream, self.info, self._lost = stream, info, False
        self._watch = asyncio.create_task(self._watch_stream(stream), name="bringup-lock-watch")
        return info

    async def _watch_stream(self, stream: AsyncIterator[str]) -> None:
        """The holding command prints nothing more: its stream ends only when the lock is gone."""
        with contextlib.suppress(Exception):
            async for _ in stream:
                pass
        self._lost = True

    async def still_held(self) -> bool:
        if self.info is None or self._lost:
            return False
        raw = await self.transport.read_file(self.path + ".owner")
        try:
            rec = json.loads(raw or b"{}")
            return (rec.get("token") == self.info.token
                    and await _alive(self.transport, int(rec.get("lock_pid") or 0)))
        except (ValueError, TypeError, AttributeError):
            return False

    async def retake(self) -> LockInfo:
        await self._release_stream()
        # after a partition the host may not have noticed our old connection is gone: its holder, ours, still
        # holds the flock; it is ours to end (the record's token proves it)
        raw = await self.transport.read_file(self.path + ".owner")
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            rec = json.loads(raw or b"{}")
            pid = int(rec.get("lock_pid") or 0)
            if self.info is not None and rec.get("token") == self.info.token and pid > 0:
                await self.transport.run(["kill", "-TERM", str(pid)], timeout=5)
                for _ in range(50):
                    if not await _alive(self.transport, pid):
                        break
                    await asyncio.sleep(0.1)
        return await self._take()

    async def holder(self) -> LockInfo | None:
        raw = await self.transport.read_file(self.path + ".owner")
        info = lock_info_from(raw)
        if info is None:
            return None
        try:
            pid = int(json.loads(raw or b"{}").get("lock_pid") or 0)
        except (ValueError, TypeError, AttributeError):
            pid = 0
        return info if pid and await _alive(self.transport, pid) else None

    async def note(self, step: str) -> None:
        """Rewrites our record with the step (atomically: a reader sees the old record or the new one), only while
        the record is still ours."""
        if self.info is None or self._lost:
            return
        raw = await self.transport.read_file(self.path + ".owner")
        try:
            rec = json.loads(raw or b"{}")
        except ValueError:
            return
        if rec.get("token") != self.info.token:
            return
        rec["step"] = step
        await self.transport.write_file(self.path + ".owner", json.dumps(rec).encode())

    async def _release_stream(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(BaseException):
                await self._watch
            self._watch = None
        if self._stream is not None:
            with contextlib.suppress(Exception):
                await self._stream.aclose()  # type: ignore[attr-defined]
            self._stream = None

    async def __aexit__(self, *exc: object) -> None:
        if self._stream is not None and not self._lost:
            # the record goes while the lock is still ours (a later holder's is never erased): a holder that lives
            # on, such as a console, would otherwise read as a restart in progress to `bringup wait`
            with contextlib.suppress(TransportError, OSError):
                async with asyncio.timeout(5):
                    if await self.still_held():
                        await self.transport.write_file(self.path + ".owner", b"")
        await self._release_stream()
        self.info = None


async def _alive(transport: Transport, pid: int) -> bool:
    """A process on the host, alive and not a zombie (read through the transport: a pid of the host's)."""
    if pid <= 0:
        return False
    stat = await transport.read_file(f"/proc/{pid}/stat")
    return stat is not None and stat.rsplit(b")", 1)[-1].split()[0:1] not in ([b"Z"], [b"X"])
