"""The `systemd` manager: a unit on a host, driven through any transport (SSH in practice).

- State from `systemctl show` (parsed into a dict: it prints properties in its own order).
- The server's flags are the unit's effective ExecStart (`systemctl cat`: the last ExecStart after the last reset);
  new flags are written as a drop-in, `UNIT.d/50-bringup.conf` with `ExecStart=` cleared and the new one set,
  written to a temp file and renamed, then `daemon-reload`. The previous drop-in is kept next to it for rollback.
  Never a sed on the unit file.
- The journal: `journalctl -u UNIT -o json -f`, every entry tied to its `_SYSTEMD_INVOCATION_ID`; after a lost
  connection the stream resumes with `--after-cursor`, so no line is lost or repeated.
- The restart lock is flock(1) on the host, held by a command whose stdin we keep open: it is released when we
  close it, and also when our SSH connection dies (remote_lock.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tui.lifecycle.journal import parse_entry
from tui.managers import ManagerError, PermanentError
from tui.managers.remote_lock import RemoteLock
from tui.managers.systemd_show import batch_for
from tui.model import LogLine, UnitState
from tui.transport import CommandResult, Transport, TransportError

PROPS = ("LoadState", "ActiveState", "SubState", "MainPID", "InvocationID", "ExecMainStatus", "ExecMainCode",
         "NRestarts", "ActiveEnterTimestamp", "ExecMainStartTimestamp", "InactiveEnterTimestamp", "Result",
         "ControlGroup")
DROPIN = "50-bringup.conf"
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.service$")
_SYSTEMD_SAFE = re.compile(r"^[A-Za-z0-9_./:@+=,~-]+$")


def parse_show(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _ts(v: str) -> float | None:
    """`--timestamp=unix` gives `@1732870000`; anything else is not worth guessing."""
    if v.startswith("@"):
        try:
            return float(v[1:])
        except ValueError:
            return None
    return None


def systemd_quote(arg: str) -> str:
    """Quote one argument for an ExecStart= line: specifiers (%) and variables ($) are escaped, and anything with
    spaces or quotes is double-quoted."""
    if _SYSTEMD_SAFE.match(arg):
        return arg
    escaped = (arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
               .replace("\n", "\\n"))
    return f'"{escaped}"'


def exec_start_from_cat(text: str) -> list[str]:
    """The effective ExecStart argv from `systemctl cat` output (unit file, then drop-ins in order)."""
    current: list[str] = []
    in_service = False
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            in_service = line == "[Service]"
            continue
        if not in_service or not line.startswith("ExecStart="):
            continue
        value = line[len("ExecStart="):].strip()
        if not value:
            current = []
            continue
        value = value.lstrip("@-:+!")  # systemd's exec prefixes
        try:
            current = [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(value)]
        except ValueError:
            current = value.split()
    return current


class SystemdManager:
    kind = "systemd"
    can_control = True

    def __init__(self, transport: Transport, unit: str, *, sudo: bool = False, stop_timeout: float = 120.0) -> None:
        if not _UNIT_NAME.match(unit):
            raise PermanentError(f"not a systemd service name: {unit!r} (expected NAME.service)")
        self.transport = transport
        self.unit = unit
        self.sudo = sudo
        self.stop_timeout = stop_timeout
        self.target = f"unit {unit}"
        self.dropin_dir = f"/etc/systemd/system/{unit}.d"
        self._argv: tuple[str, list[str]] | None = None  # (invocation it was read for, argv)
        self._cgroup = ""  # the unit's cgroup at the last reading

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
                raise PermanentError(f"{self.transport.name}: `{argv[0]} {argv[1] if len(argv) > 1 else ''}` needs "
                                   f"root: set sudo = true for this host and allow passwordless sudo for it ({err})")
            if "Access denied" in err or "Interactive authentication required" in err or "not permitted" in err:
                raise PermanentError(f"{self.transport.name}: permission denied for `{' '.join(argv[:3])}`: set "
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
            raise PermanentError(f"unit {self.unit} not found on {self.transport.name} (`systemctl list-units "
                               f"'*sglang*'` lists what is there)")
        status = p.get("ExecMainStatus", "")
        exit_status = int(status) if status.lstrip("-").isdigit() else None
        code = p.get("ExecMainCode", "")
        if code == "2" and exit_status is not None:  # killed by a signal: report it like a shell, -N
            exit_status = -exit_status
        return UnitState(active=p.get("ActiveState", "unknown"), sub=p.get("SubState", ""),
                         main_pid=int(p.get("MainPID") or 0), invocation=p.get("InvocationID", ""),
                         exit_status=exit_status, n_restarts=int(p.get("NRestarts") or 0),
                         started_at=_ts(p.get("ExecMainStartTimestamp", "")) or _ts(p.get("ActiveEnterTimestamp", "")),
                         exited_at=_ts(p.get("InactiveEnterTimestamp", "")),
                         argv=tuple(await self._argv_for(p.get("InvocationID", ""))))

    async def _argv_for(self, invocation: str) -> list[str]:
        """The ExecStart of a run only changes with a new run (or our own write): read it once per run."""
        if self._argv is None or self._argv[0] != invocation:
            self._argv = (invocation, await self.read_argv())
        return self._argv[1]

    async def start(self, argv: Sequence[str]) -> None:
        await self._run(["systemctl", "start", "--no-block", self.unit], priv=True)

    async def stop(self) -> None:
        await self._run(["systemctl", "stop", self.unit], timeout=self.stop_timeout + 10, priv=True)

    async def follow(self, unit: UnitState) -> AsyncIterator[LogLine]:
        """The unit's journal from the start of this invocation, then live; resumes by cursor after a drop."""
        since = f"@{int(unit.started_at) - 1}" if unit.started_at else "-10min"
        cursor = ""
        backoff = 0.5
        while True:
            argv = ["journalctl", "-u", self.unit, "-o", "json", "--all", "-f", "--no-pager"]
            argv += [f"--after-cursor={cursor}"] if cursor else ["--since", since, "-n", "all"]
            try:
                async for raw in self.transport.stream(self._priv(argv)):
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
        argv = ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json", "--all", "--no-pager"]
        res = await self.transport.run(self._priv(argv) if self.sudo else argv, timeout=60)
        out = []
        for raw in res.text.splitlines():
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            line = journal_line(obj)
            if line is not None:
                out.append(line)
        return out

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
                return {int(x) for x in data.split() if x.isdigit()}
        return None

    async def read_argv(self) -> list[str]:
        return exec_start_from_cat(await self._run(["systemctl", "cat", self.unit]))

    async def _write_root_file(self, path: str, data: bytes) -> None:
        if not self.sudo:
            await self.transport.write_file(path, data)
            return
        tmp = f"/tmp/bringup-{self.unit}-{int(time.time() * 1000)}.tmp"
        await self.transport.write_file(tmp, data)
        await self._run(["install", "-D", "-m", "0644", tmp, path], priv=True)
        await self._run(["rm", "-f", tmp])

    async def write_argv(self, argv: Sequence[str]) -> None:
        if not argv:
            raise ManagerError("refusing to write an empty ExecStart")
        body = ("# written by bringup: the server's flags. The previous version is 50-bringup.conf.previous.\n"
                "[Service]\nExecStart=\nExecStart=" + " ".join(systemd_quote(a) for a in argv) + "\n").encode()
        dest = f"{self.dropin_dir}/{DROPIN}"
        old = await self.transport.read_file(dest)
        if old is not None:
            await self._write_root_file(dest + ".previous", old)
        else:
            await self.save_argv("previous", await self.read_argv())
        await self._write_root_file(dest, body)
        await self._run(["systemctl", "daemon-reload"], priv=True)
        self._argv = None

    async def read_saved_argv(self, which: str) -> list[str] | None:
        data = await self.transport.read_file(f"{self.dropin_dir}/bringup-{which}.json")
        if data is None and which == "previous":
            prev = await self.transport.read_file(f"{self.dropin_dir}/{DROPIN}.previous")
            return exec_start_from_cat(prev.decode()) if prev else None
        try:
            v = json.loads(data) if data else None
        except ValueError:
            return None
        return v if isinstance(v, list) else None

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        await self._write_root_file(f"{self.dropin_dir}/bringup-{which}.json", json.dumps(list(argv)).encode())

    def lock(self, purpose: str, change: str = "") -> RemoteLock:
        return RemoteLock(self.transport, f"/run/lock/bringup-{self.unit}.lock", purpose, change)


def journal_line(obj: dict[str, Any]) -> LogLine | None:
    """A journal entry as a LogLine; systemd's own messages about the unit keep an empty invocation."""
    e = parse_entry(obj)
    return LogLine(at=e.at if e.at is not None else time.time(), text=e.text, invocation=e.invocation,
                   cursor=e.cursor)
