"""The `systemd` manager: a unit on a host, driven through any transport (SSH in practice).

- State from `systemctl show` (parsed into a dict: it prints properties in its own order).
- The server's flags are the unit's effective ExecStart (`systemctl cat`: the last ExecStart after the last reset),
  read by systemd's own grammar (exec_line.py). New flags are written as a drop-in, `UNIT.d/50-bringup.conf` with
  `ExecStart=` cleared and the new one set, in which every word bringup does not change is written exactly as the
  unit writes it (prefixes, quotes, escapes, `${VAR}`, `%i`) and only bringup's own words are quoted; a change that
  would touch a word holding a variable or a specifier, a unit with several ExecStart= lines, or a drop-in read
  after bringup's that also sets ExecStart= is refused, naming it. Flags equal to the unit's own command line
  remove the drop-in: the unit runs exactly what it says again. The previous drop-in is kept next to it for
  rollback. Files are written as root through one `sh -c` on the host (a `mktemp` in the drop-in's directory,
  checked by the guarded directory helper, renamed into place): nothing in /tmp, no name anyone can guess, and 0600,
  for they hold the server's command line (an `--api-key`): systemd reads them as root, and bringup reads them back
  through sudo when it acts as root through sudo. Never a sed on the unit.
- The journal: `journalctl -u UNIT -o json -f`, every entry tied to its `_SYSTEMD_INVOCATION_ID`; after a lost
  connection the stream resumes with `--after-cursor`, so no line is lost or repeated.
- A run's journal read back (`read_log`: a run that ended unfollowed) is bounded (log_window.py): its first entries
  and its last (`--reverse`), each read within its window (tui/transport/capped.py), never the whole run.
- The restart lock is flock(1) on the host, held by a command whose stdin we keep open: it is released when we
  close it, and also when our SSH connection dies (remote_lock.py). It lives in `/run/bringup/UNIT.lock`, a
  directory only root can write, when bringup acts as root on the host (root over SSH, or sudo = true): every
  operator of the host who manages its units (they need root for the drop-in anyway) sees every other's lock.
  A user that is not root and has no sudo gets a lock in a directory of its own (`/run/user/UID/bringup`, else
  `~/.cache/bringup-HOST`): it keeps that user's bringups apart, and NOT other users'.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from tui.guard.numbers import MAX_WHOLE, epoch_or_none, whole_or_none
from tui.guard.text import split_lines
from tui.lifecycle.journal import parse_entry, parse_record
from tui.managers import ManagerError, PermanentManagerError, Report, unreported
from tui.managers.exec_line import ExecLineError, parse
from tui.managers.exec_start import rewrite, unit_exec, values
from tui.managers.log_window import HEAD_BYTES, TAIL_BYTES, Window, join
from tui.managers.pids import pid_or_none, pids_in
from tui.managers.remote_lock import RemoteLock
from tui.managers.systemd_show import batch_for
from tui.model import LogLine, UnitState
from tui.transport import CommandResult, Transport, TransportError
from tui.transport.capped import read_capped
from tui.transport.remote_dir import GUARD_DIR

PROPS = ("LoadState", "ActiveState", "SubState", "MainPID", "InvocationID", "ExecMainStatus", "ExecMainCode",
         "NRestarts", "ActiveEnterTimestamp", "ExecMainStartTimestamp", "InactiveEnterTimestamp", "Result",
         "ControlGroup")
DROPIN = "50-bringup.conf"
#: the fields of an entry a read-back asks for (`--output-fields`; journalctl adds the cursor, the times and the
#: boot): an entry's other fields (its command line, cgroup, capabilities...) are most of a record's size
_FIELDS = "MESSAGE,_SYSTEMD_INVOCATION_ID,INVOCATION_ID,_PID,SYSLOG_IDENTIFIER"
#: the windows of a run's journal read back, in characters of `-o json` records: 4 times the text's windows, for a
#: record is its text and some 200 bytes of fields, and a message with a control character (a coloured line) comes
#: as an array of byte values, about 4 times the text
JOURNAL_HEAD = 4 * HEAD_BYTES
JOURNAL_TAIL = 4 * TAIL_BYTES
#: the locks of units, when bringup acts as root on the host (remote_lock.py checks and creates it: root's, 0755)
LOCK_DIR = "/run/bringup"
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.service$")
#: where a user that is not root keeps its locks: a directory of its own, found on the host
_USER_LOCK_DIR = ('u=$(id -u); if [ "$u" = 0 ]; then echo ' + LOCK_DIR + '; '
                  'elif [ -d "/run/user/$u" ] && [ "$(stat -c %u "/run/user/$u")" = "$u" ]; then '
                  'echo "/run/user/$u/bringup"; else echo "$HOME/.cache/bringup-$(uname -n)"; fi')
#: a root file from stdin (`$2` bytes): its directory made or checked by the one guarded helper (remote_dir.py: no
#: link followed, none another user can write), a mktemp next to it (0600: it holds the server's command line and its
#: secrets, and systemd reads unit files as root), renamed over it once complete; removed on failure
_WRITE = GUARD_DIR + (
    'set -e; d=$(dirname -- "$1"); guard_dir "$d" 755 me-or-root 0; t=$(mktemp -- "$d/.bringup.XXXXXXXX"); '
    'trap \'rm -f -- "$t"\' EXIT; head -c "$2" >"$t"; [ "$(stat -c %s -- "$t")" = "$2" ]; '
    'mv -f -- "$t" "$1"; trap - EXIT')


def parse_show(text: str) -> dict[str, str]:
    out = {}
    for line in split_lines(text):
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _ts(v: str) -> float | None:
    """`--timestamp=unix` gives `@1732870000`; anything else is not worth guessing. A moment that is none (`@inf`,
    `@-1`, a year past 2200) is absent: `follow` turns the start into `--since`, where `int(inf)` raised."""
    return epoch_or_none(v[1:]) if v.startswith("@") else None


#: an exit status: a process's exit code or the number of the signal that ended it (Linux keeps 8 bits of either)
_STATUS_MAX = 255


def exec_start_from_cat(text: str) -> list[str]:
    """The effective ExecStart argv from `systemctl cat` output (unit file, then drop-ins in order), read by
    systemd's grammar: variables and specifiers as written (exec_line.py)."""
    return values(text)


class SystemdManager:
    kind = "systemd"
    can_control = True
    sees_run = True

    def __init__(self, transport: Transport, unit: str, *, sudo: bool = False, stop_timeout: float = 120.0) -> None:
        if not _UNIT_NAME.match(unit):
            raise PermanentManagerError(f"not a systemd service name: {unit!r} (expected NAME.service)")
        self.transport = transport
        self.unit = unit
        self.sudo = sudo
        self.stop_timeout = stop_timeout
        self.target = f"unit {unit}"
        self.dropin_dir = f"/etc/systemd/system/{unit}.d"
        self._argv: tuple[str, list[str]] | None = None  # (invocation it was read for, argv)
        self._cgroup = ""  # the unit's cgroup at the last reading
        self._lock_path = f"{LOCK_DIR}/{unit}.lock" if sudo else ""  # found on the host otherwise

    def _priv(self, argv: list[str]) -> list[str]:
        return ["sudo", "-n", *argv] if self.sudo else argv

    async def _run(self, argv: list[str], timeout: float = 30.0, *, priv: bool = False,
                   input: bytes | None = None) -> str:
        res = await self.transport.run(self._priv(argv) if priv else argv, timeout=timeout, input=input)
        return self._checked(argv, res)

    def _checked(self, argv: list[str], res: CommandResult) -> str:
        if res.rc != 0:
            err = res.error_text or res.text.strip()
            if "a password is required" in err or "sudo:" in err:
                raise PermanentManagerError(
                    f"{self.transport.name}: `{argv[0]} {argv[1] if len(argv) > 1 else ''}` needs "
                    f"root: set sudo = true for this host and allow passwordless sudo for it ({err})")
            if ("Access denied" in err or "Interactive authentication required" in err or "not permitted" in err
                    or "Permission denied" in err):
                raise PermanentManagerError(f"{self.transport.name}: permission denied for `{' '.join(argv[:3])}`: set "
                                          "sudo = true for this host, or connect as a user allowed to manage the unit")
            raise ManagerError(f"{self.transport.name}: `{' '.join(argv[:3])}` failed (exit {res.rc}): {err[:300]}")
        return res.text

    async def state(self) -> UnitState:
        options = ["--timestamp=unix", "-p", ",".join(PROPS)]
        # read together with the other units of the host read at this moment (systemd_show.py)
        res = await batch_for(self.transport).show(self.unit, options)
        text = self._checked(["systemctl", "show", self.unit, *options], res)
        p = parse_show(text)
        self._cgroup = p.get("ControlGroup", "")
        if p.get("LoadState") == "not-found":
            raise PermanentManagerError(f"unit {self.unit} not found on {self.transport.name} (`systemctl list-units "
                                      f"'*sglang*'` lists what is there)")
        # the numbers of `systemctl show` through the one parser (tui/guard/numbers.py): a value that is none (`²`,
        # which isdigit() passes and int() refuses, `-1`, 5,000 digits) is absent, never a failed reading
        exit_status = whole_or_none(p.get("ExecMainStatus", ""), low=0, high=_STATUS_MAX, text=True)
        n_restarts = whole_or_none(p.get("NRestarts", ""), low=0, high=MAX_WHOLE, text=True) or 0
        code = p.get("ExecMainCode", "")
        if code == "2" and exit_status is not None:  # killed by a signal: report it like a shell, -N
            exit_status = -exit_status
        return UnitState(active=p.get("ActiveState", "unknown"), sub=p.get("SubState", ""),
                         main_pid=pid_or_none(p.get("MainPID", "")) or 0, invocation=p.get("InvocationID", ""),
                         exit_status=exit_status, n_restarts=n_restarts,
                         started_at=_ts(p.get("ExecMainStartTimestamp", "")) or _ts(p.get("ActiveEnterTimestamp", "")),
                         exited_at=_ts(p.get("InactiveEnterTimestamp", "")),
                         argv=tuple(await self._argv_for(p.get("InvocationID", ""))))

    async def _argv_for(self, invocation: str) -> list[str]:
        """The ExecStart of a run only changes with a new run (or our own write): read it once per run."""
        if self._argv is None or self._argv[0] != invocation:
            self._argv = (invocation, await self.read_argv())
        return self._argv[1]

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        await self._run(["systemctl", "start", "--no-block", self.unit], priv=True)

    async def stop(self, report: Report = unreported) -> None:
        await self._run(["systemctl", "stop", self.unit], timeout=self.stop_timeout + 10, priv=True)

    async def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        """The unit's journal from the start of this invocation, then live; resumes by cursor after a drop."""
        since = f"@{int(unit.started_at) - 1}" if unit.started_at else "-10min"
        cursor = ""
        backoff = 0.5
        while True:
            argv = ["journalctl", "-u", self.unit, "-o", "json", "--all", "-f", "--no-pager"]
            argv += [f"--after-cursor={cursor}"] if cursor else ["--since", since, "-n", "all"]
            try:
                async with contextlib.aclosing(self.transport.stream(self._priv(argv))) as raws:
                    async for raw in raws:
                        if not raw.startswith("{"):
                            continue
                        try:
                            obj = json.loads(raw)
                        except ValueError:
                            continue
                        cursor = str(obj.get("__CURSOR") or cursor)
                        line = journal_line(obj)
                        # `--since` reaches a second back, into the previous run's last lines (already delivered,
                        # by the follow of that run), and `-u` goes on into the next run (followed on its own)
                        if line is not None and (not line.invocation or line.invocation == unit.invocation):
                            yield line
                        backoff = 0.5
            except TransportError:
                pass
            # `journalctl -f` only ends when its channel does: resume after the last line we got
            await asyncio.sleep(backoff)  # the transport reconnects on the next call
            backoff = min(backoff * 2, 10.0)

    def log_source(self, invocation: str) -> str:
        return f"`journalctl _SYSTEMD_INVOCATION_ID={invocation}` on {self.transport.name}"

    async def read_log(self, invocation: str) -> list[LogLine]:
        """The run's journal, bounded (log_window.py): its first entries read forwards, and unless those were all of
        it, its last entries read backwards (`--reverse`), each up to its window; never the whole run."""
        argv = ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json", f"--output-fields={_FIELDS}",
                "--all", "--no-pager"]
        head = await self._read_entries(argv, JOURNAL_HEAD)
        tail = None
        if head.cut:
            back = await self._read_entries([*argv, "--reverse"], JOURNAL_TAIL)
            tail = Window(back.lines[::-1], back.cut)
        return join(head, tail, invocation, self.log_source(invocation))

    async def _read_entries(self, argv: list[str], limit: int) -> Window:
        got = await read_capped(self.transport, self._priv(argv), limit=limit, timeout=60)
        out = []
        for raw in got.lines:
            obj = parse_record(raw)
            line = journal_line(obj) if obj is not None else None
            if line is not None:
                out.append(line)
        return Window(out, got.cut)

    async def pids(self, unit: UnitState) -> set[int] | None:
        """The unit's cgroup: every process systemd started for it, children included."""
        if not unit.running:
            return set()
        cg = self._cgroup  # from the reading the unit loop just made: no command of its own
        if not cg.startswith("/"):
            cg = (await self._run(["systemctl", "show", "-p", "ControlGroup", "--value", self.unit])).strip()
        if not cg.startswith("/"):
            return None
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd"):
            data = await self.transport.read_file(f"{root}{cg}/cgroup.procs")
            if data:
                return pids_in(data.decode("ascii", "replace").split())
        return None

    async def read_argv(self) -> list[str]:
        # through sudo when bringup acts as root that way: `systemctl cat` reads the files itself, and the drop-in
        # is root's, 0600
        return exec_start_from_cat(await self._run(["systemctl", "cat", self.unit], priv=True))

    async def _write_root_file(self, path: str, data: bytes) -> None:
        """A file of root's (a drop-in, a saved argv), written on the host by one command, the content on stdin
        (`_WRITE`: 0600 from the start, its directory checked, renamed into place, removed if anything fails)."""
        await self._run(["sh", "-c", _WRITE, "bringup-write", path, str(len(data))], priv=True, input=data)

    async def _read_root_file(self, path: str) -> bytes | None:
        """A file `_write_root_file` wrote (None when it is not there): read as the user bringup acts as, through
        sudo when it acts as root that way (the file is root's, 0600)."""
        if not self.sudo:
            return await self.transport.read_file(path)
        res = await self.transport.run(self._priv(["sh", "-c", '[ -e "$1" ] || exit 3; exec cat -- "$1"',
                                                   "bringup-read", path]), timeout=30)
        if res.rc == 3:
            return None
        self._checked(["cat", path], res)
        return res.stdout

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None:
        if not argv:
            raise ManagerError("refusing to write an empty ExecStart")
        dest = f"{self.dropin_dir}/{DROPIN}"
        cat = await self._run(["systemctl", "cat", self.unit], priv=True)
        text = self._exec_start_for(cat, list(argv), dest)
        old = await self._read_root_file(dest)
        if old is not None:
            await self._write_root_file(dest + ".previous", old)
        await self.save_argv("previous", values(cat))
        if text is None:  # the unit's own command line: no drop-in, the unit runs what it says
            if old is not None:
                await self._run(["rm", "-f", "--", dest], priv=True)
        else:
            body = ("# written by bringup: the server's flags. The previous version is 50-bringup.conf.previous.\n"
                    "# Every word bringup did not change is as the unit writes it; bringup's own are quoted.\n"
                    "[Service]\nExecStart=\nExecStart=" + text + "\n").encode()
            await self._write_root_file(dest, body)
        await self._run(["systemctl", "daemon-reload"], priv=True)
        self._argv = None
        now = await self.read_argv()
        if now != list(argv):
            raise ManagerError(f"{self.transport.name}: after writing {dest}, {self.unit} runs {now}, not the flags "
                               "written: another drop-in or a unit file changed meanwhile?")

    def _exec_start_for(self, cat: str, argv: list[str], dest: str) -> str | None:
        """The ExecStart= bringup's drop-in sets for `argv` (None: the unit's own, no drop-in), from the unit as
        `systemctl cat` shows it; PermanentManagerError, naming the construct, when it cannot be written exactly."""
        where = f"{self.unit} on {self.transport.name}"
        later = [f for f in unit_exec(cat).setters if f != dest and f.endswith(".conf")
                 and f.rsplit("/", 1)[-1] > DROPIN]
        if later:
            raise PermanentManagerError(
                f"{where}: ExecStart= is also set in {', '.join(later)}, which systemd reads after "
                f"bringup's {DROPIN}: the flags bringup writes would not be run; move that "
                "ExecStart= into the unit file, or into a drop-in that sorts before "
                f"{DROPIN}")
        own = unit_exec(cat, without=dest)
        if not own.lines:
            raise PermanentManagerError(f"{where}: no ExecStart= outside bringup's drop-in: nothing to rewrite")
        if len(own.lines) > 1:
            raise PermanentManagerError(
                f"{where}: {len(own.lines)} ExecStart= command lines in effect (Type=oneshot runs "
                f"them one after the other, from {', '.join(sorted({x.source for x in own.lines}))})"
                ": bringup rewrites a unit with one")
        line = own.lines[0]
        try:
            line = parse(line.written, line.source)  # strict: what systemd would not read is said, not guessed
            if argv == line.argv:
                return None
            return rewrite(line, argv, own.origins)
        except ExecLineError as e:
            raise PermanentManagerError(f"{where}: cannot rewrite its ExecStart= exactly: {e}") from None

    async def read_saved_argv(self, which: str) -> list[str] | None:
        data = await self._read_root_file(f"{self.dropin_dir}/bringup-{which}.json")
        if data is None and which == "previous":
            prev = await self._read_root_file(f"{self.dropin_dir}/{DROPIN}.previous")
            return exec_start_from_cat(prev.decode()) if prev else None
        try:
            v = json.loads(data) if data else None
        except ValueError:
            return None
        return v if isinstance(v, list) else None

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        await self._write_root_file(f"{self.dropin_dir}/bringup-{which}.json", json.dumps(list(argv)).encode())

    async def lock_path(self) -> str:
        """The lock's file on the host: in LOCK_DIR when bringup acts as root there, else in a directory of the SSH
        user's own (asked once)."""
        if not self._lock_path:
            found = (await self._run(["sh", "-c", _USER_LOCK_DIR])).strip()
            if not found.startswith("/"):
                raise ManagerError(f"{self.transport.name}: no directory for the lock (got {found!r})")
            self._lock_path = f"{found}/{self.unit}.lock"
        return self._lock_path

    def lock(self, purpose: str, change: str = "") -> RemoteLock:
        return RemoteLock(self.transport, self._lock_path, purpose, change, sudo=self.sudo,
                          where=None if self._lock_path else self.lock_path)


def journal_line(obj: dict[str, Any]) -> LogLine | None:
    """A journal entry as a LogLine; systemd's own messages about the unit keep an empty invocation."""
    e = parse_entry(obj)
    return LogLine(at=e.at if e.at is not None else time.time(), text=e.text, invocation=e.invocation,
                   cursor=e.cursor)
