"""The lock of a deployment on another host: flock(1) there, held by a command whose stdin we keep open.

It is released when we close that command, and also when our SSH connection dies, so it can be lost under a
running restart: `still_held` proves on the host that it is still ours, and `retake` takes it back. Who holds it
is in `PATH.owner`, the shared record (lock_record.py) plus the pid of the holding command on that host.

Where it lives, and why there: the lock file and its record sit in a directory that only the user bringup acts as
on the host can write (root, for the systemd manager as root or with sudo: `/run/bringup`, systemd.py). A directory
others can write (the old `/run/lock`) lets any local user hold the lock forever, forge the record, or plant a
symbolic link that makes bringup write its record through it as root. So the command on the host (`_SCRIPT`, one
`sh -c` with every path an argument, never spliced into the script) checks the directory with the one guarded
directory helper (`transport/remote_dir.py`'s `guard_dir`: refused, with the reason, a directory that is a symbolic
link, is not owned by that user, or is writable by group or others, and a parent that others can write without the
sticky bit); it creates the directory 0755 (its record readable by every operator: it says who holds the
lock, nothing secret) and the lock file 0600 (no one else can open it, so no one else can hold it). The lock file is
created with O_NOFOLLOW (`dd oflag=nofollow`), the file opened to hold it is checked to be that file, and the record
is written to a fresh `mktemp` file renamed over the old one (a rename replaces a link, never follows it).

A lock that is busy is reported by who holds the flock, found in /proc/locks (the kernel's own table: inode ->
pid): a bringup when its record names that very process, else "held by pid N (user: command), which is not a
bringup", so that a stuck or hostile holder is named instead of read as a bringup that left no record.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncGenerator, Awaitable, Callable

from tui.errors import PermanentError as Permanent
from tui.managers import LockHeld, LockInfo, ManagerError, PermanentManagerError, refusal
from tui.managers.lock_record import lock_info_from, new_record
from tui.managers.pids import pid_or_none
from tui.transport import Transport, TransportError, process_alive
from tui.transport.remote_dir import GUARD_DIR

#: the command on the host: `sh -c _SCRIPT bringup-lock OP PATH RECORD`, OP take (hold the lock until our channel
#: closes; RECORD without its closing brace, the holder's pid is added) or record (write RECORD into PATH.owner).
#: Answers one line: `locked`, `written`, `busy [PID USER COMMAND]` or `refused: WHY`.
_SCRIPT = GUARD_DIR + r"""
op=$1 f=$2 rec=${3-}
case $f in */*) d=${f%/*} ;; *) d=. ;; esac
[ -n "$d" ] || d=/
guard_dir "$d" 755 me 0
record() {  # $1 into PATH.owner, atomically: a fresh file renamed over the old one (a link is replaced, not followed)
    t=$(mktemp -- "$f.owner.XXXXXX" 2>/dev/null) || refuse "cannot write in $d"
    printf '%s' "$1" >"$t" && chmod 0644 -- "$t" && mv -f -- "$t" "$f.owner" \
        || { rm -f -- "$t"; refuse "cannot write $f.owner"; }
}
if [ "$op" = record ]; then record "$rec"; echo written; exit 0; fi
if [ -L "$f" ]; then refuse "$f is a symbolic link"; fi
if [ ! -e "$f" ]; then
    (umask 077; dd if=/dev/null of="$f" oflag=nofollow conv=notrunc status=none 2>/dev/null) || [ -e "$f" ] \
        || refuse "cannot create $f (GNU dd with oflag=nofollow is needed)"
fi
if [ -L "$f" ] || [ ! -f "$f" ]; then refuse "$f is not a regular file"; fi
exec 9<"$f" 2>/dev/null || refuse "cannot open $f"
[ "$(stat -L -c %d:%i /proc/$$/fd/9)" = "$(stat -c %d:%i -- "$f")" ] || refuse "$f changed while it was opened"
[ "$(stat -c %u -- "$f")" != "$me" ] || chmod 0600 -- "$f"
if ! flock -n 9; then
    # who holds it: the processes whose open file carries the lock (/proc/PID/fdinfo), else the locker that
    # /proc/locks names (0 there when that process is gone, as flock(1)'s helper is once it has locked a fd)
    set -- $(stat -c '%d %i' -- "$f")
    key=$(printf '%02x:%02x:%s' $((($1 >> 8) & 4095)) $((($1 & 255) | (($1 >> 12) & 1048320))) "$2")
    set +f
    pids=$(find /proc/[0-9]*/fdinfo -maxdepth 1 -type f 2>/dev/null \
        | xargs -r grep -ls -- "FLOCK .* $key " 2>/dev/null \
        | sed -n 's|^/proc/\([0-9]*\)/.*|\1|p' | sort -un | head -5 | tr '\n' ',')
    set -f
    pids=${pids%,}
    if [ -z "$pids" ]; then
        while read -r _ a _ _ e g _; do
            if [ "$a" = FLOCK ] && [ "$g" = "$key" ] && [ "$e" != 0 ]; then pids=$e; break; fi
        done </proc/locks
    fi
    if [ -n "$pids" ]; then
        pid=${pids%%,*}
        user=$(stat -c %U /proc/$pid 2>/dev/null || echo '?')
        echo "busy $pids $user $(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | cut -c1-200)"
    else
        echo busy
    fi
    exit 75
fi
record "$(printf '%s, "lock_pid": %s}' "$rec" "$$")"
echo locked
exec sleep 2147483647
"""


class RemoteLock:
    """flock(1) on the host, held as long as a command whose stdin we keep open runs.

    The command runs on a pty, so sshd hangs it up when our connection drops: the lock is then free for anyone.
    `still_held` proves ownership on the host itself (our token in the record, and the holding process alive), so
    a restart never runs a step on a lock it lost without knowing it.

    `path` is the lock file; `where`, when given, finds it instead (asked once, on the host); `sudo` runs the
    commands that take the lock and write its record through `sudo -n` (the record is read without)."""

    def __init__(self, transport: Transport, path: str, purpose: str, change: str = "", *, sudo: bool = False,
                 where: Callable[[], Awaitable[str]] | None = None) -> None:
        self.transport = transport
        self.path = path
        self.purpose = purpose
        self.change = change
        self.sudo = sudo
        self._where = where
        self.info: LockInfo | None = None
        self._stream: AsyncGenerator[str, None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._lost = False

    async def where(self) -> str:
        """The lock file's path on the host."""
        if self._where is not None:
            self.path = await self._where()
            self._where = None
        return self.path

    def _argv(self, op: str, path: str, *args: str) -> list[str]:
        argv = ["sh", "-c", _SCRIPT, "bringup-lock", op, path, *args]
        return ["sudo", "-n", *argv] if self.sudo else argv

    async def __aenter__(self) -> LockInfo:
        return await self._take()

    async def _take(self) -> LockInfo:
        path = await self.where()
        info = new_record(self.purpose, self.change)
        owner = json.dumps(dataclasses.asdict(info))[:-1]  # the holder's pid is added on the host: `$$`
        stream = self.transport.stream(self._argv("take", path, owner))
        first = ""
        try:
            async with asyncio.timeout(20):
                async for line in stream:
                    first = line.strip()
                    break
        except (TimeoutError, TransportError) as e:
            with contextlib.suppress(Exception):
                await stream.aclose()
            if isinstance(e, Permanent):
                raise
            raise ManagerError(f"could not take the lock on {self.transport.name}: {e}") from None
        if first != "locked":
            with contextlib.suppress(Exception):
                await stream.aclose()
            where = f"the lock {path} on {self.transport.name}"
            if not first:
                raise ManagerError(f"could not take {where}: the command ended without a word")
            if first == "busy" or first.startswith("busy "):
                raise await self._busy(path, first)
            # not someone else's lock: this one cannot be had at all (a directory refused, sudo refused, ...)
            why = first.removeprefix("refused: ")
            hint = (" (set sudo = true for this host and allow passwordless sudo for it)"
                    if "password is required" in first else "")
            raise PermanentManagerError(f"cannot take {where}: {why}{hint}")
        self._stream, self.info, self._lost = stream, info, False
        self._watch = asyncio.create_task(self._watch_stream(stream), name="bringup-lock-watch")
        return info

    async def _busy(self, path: str, line: str) -> LockHeld:
        """The refusal for a busy lock: the bringup whose record names the process holding the flock, or that
        process itself, by pid, user and command, when it is no bringup."""
        parts = line.split(" ", 3)
        # in the script's order; a word that is no pid (`²`, which isdigit() passes and int() refuses) is left out
        pids = [p for x in parts[1].split(",") if (p := pid_or_none(x)) is not None] if len(parts) > 1 else []
        if not pids:  # neither /proc/PID/fdinfo nor /proc/locks names it (another pid namespace): the record says
            holder = await self.holder()
            if holder is not None:
                return refusal(holder)
            return LockHeld(f"the lock {path} on {self.transport.name} is held by a process that is not a bringup "
                            "(no live record names it), and neither /proc/*/fdinfo nor /proc/locks says which")
        pid = pids[0]
        user = parts[2] if len(parts) > 2 else "?"
        command = parts[3].strip() if len(parts) > 3 else ""
        rec: dict[str, object] = {}
        for _ in range(20):  # a bringup that has just taken it writes its record a moment later
            raw = await self.transport.read_file(path + ".owner")
            try:
                loaded = json.loads(raw or b"{}")
                rec = loaded if isinstance(loaded, dict) else {}
            except ValueError:
                rec = {}
            if str(rec.get("lock_pid", "")) in {str(p) for p in pids}:
                info = lock_info_from(raw)
                if info is not None:
                    return refusal(info)
            if not await process_alive(self.transport, pid):
                break
            await asyncio.sleep(0.1)
        info = lock_info_from(json.dumps(rec))
        named = (f"; its record names {info.describe()}, holding pid {rec.get('lock_pid')}" if info is not None
                 else "; it left no record")
        return LockHeld(f"the lock {path} on {self.transport.name} is held by pid {pid} (user {user}: "
                        f"{command or '?'}), which is not a bringup{named}")

    async def _watch_stream(self, stream: AsyncGenerator[str, None]) -> None:
        """The holding command prints nothing more: its stream ends only when the lock is gone."""
        with contextlib.suppress(Exception):
            async for _ in stream:
                pass
        self._lost = True

    async def _record(self) -> tuple[bytes | None, dict[str, object]]:
        raw = await self.transport.read_file(await self.where() + ".owner")
        try:
            rec = json.loads(raw or b"{}")
        except ValueError:
            return raw, {}
        return raw, rec if isinstance(rec, dict) else {}

    async def _write_record(self, data: bytes) -> None:
        res = await self.transport.run(self._argv("record", await self.where(), data.decode()), timeout=15)
        if res.rc != 0 or res.text.strip() != "written":
            raise ManagerError(f"cannot write the lock's record on {self.transport.name}: "
                               f"{(res.text.strip() or res.error_text)[:300]}")

    async def still_held(self) -> bool:
        if self.info is None or self._lost:
            return False
        _, rec = await self._record()
        pid = self._holding_pid(rec)
        return rec.get("token") == self.info.token and pid is not None and await process_alive(self.transport, pid)

    @staticmethod
    def _holding_pid(rec: dict[str, object]) -> int | None:
        """The pid of the command holding the flock, as the script wrote it in the record: a JSON number (`$$`).
        Anything else (`"123"` in quotes, `true`, `-1`, 30 digits) names no process: not ours to trust, to wait on,
        or to kill."""
        return pid_or_none(rec.get("lock_pid"), text=False)

    async def retake(self) -> LockInfo:
        await self._release_stream()
        # after a partition the host may not have noticed our old connection is gone: its holder, ours, still
        # holds the flock; it is ours to end (the record's token proves it)
        _, rec = await self._record()
        pid = self._holding_pid(rec)
        if self.info is not None and rec.get("token") == self.info.token and pid is not None:
            kill = ["kill", "-TERM", str(pid)]
            await self.transport.run(["sudo", "-n", *kill] if self.sudo else kill, timeout=5)
            for _ in range(50):
                if not await process_alive(self.transport, pid):
                    break
                await asyncio.sleep(0.1)
        return await self._take()

    async def holder(self) -> LockInfo | None:
        raw, rec = await self._record()
        info = lock_info_from(raw)
        if info is None:
            return None
        pid = self._holding_pid(rec)
        return info if pid is not None and await process_alive(self.transport, pid) else None

    async def note(self, step: str) -> None:
        """Rewrites our record with the step (atomically: a reader sees the old record or the new one), only while
        the record is still ours."""
        if self.info is None or self._lost:
            return
        _, rec = await self._record()
        if not rec or rec.get("token") != self.info.token:
            return
        rec["step"] = step
        await self._write_record(json.dumps(rec).encode())

    async def _release_stream(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(BaseException):
                await self._watch
            self._watch = None
        if self._stream is not None:
            with contextlib.suppress(Exception):
                await self._stream.aclose()
            self._stream = None

    async def __aexit__(self, *exc: object) -> None:
        if self._stream is not None and not self._lost:
            # the record goes while the lock is still ours (a later holder's is never erased): a holder that lives
            # on, such as a console, would otherwise read as a restart in progress to `bringup wait`
            with contextlib.suppress(TransportError, ManagerError, OSError):
                async with asyncio.timeout(5):
                    if await self.still_held():
                        await self._write_record(b"")
        await self._release_stream()
        self.info = None

