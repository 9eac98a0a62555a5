"""The `process` manager: bringup starts the server itself under a detached supervisor (see supervisor.py).

State lives in a run directory on the server's host: `current.json` (invocation, pids, argv, exit status),
`logs/<invocation>.log` (timestamped output; `.log.head` and `.log.1` once the log cap rotated it: supervisor.py),
`argv*.json` (flags: next, previous, last ready) and `restart.lock`. All access goes through the transport, so the same
code can later drive a remote host. The directory is 0700 and every file 0600: server output and flags are the
operator's, not every user's.

A run's log is read bounded (`read_log`, and `follow` when it attaches to a long run): its first HEAD_BYTES (the
start-up lines: phases, the listening and ready lines) and its last TAIL_BYTES (how it ended: the fatal line, the
traceback, the last throughput line), with one line saying how much between was not read and where the whole log
is. A 1.6 GB log read whole took `status` 216 s at 7.4 GB RSS; bounded it costs what 5 MiB costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.guard.numbers import EPOCH_MAX, EPOCH_MIN, real_or_none, whole_or_none
from tui.guard.text import split_lines
from tui.lifecycle.flags import describe_command
from tui.managers import ManagerError, PermanentManagerError, Report, unreported
from tui.managers.file_lock import FileLock
from tui.managers.supervisor import write_private
from tui.model import LogLine, UnitState
from tui.transport import Transport, process_alive, stat_alive

_SUPERVISOR = (Path(__file__).with_name("supervisor.py")).read_text(encoding="utf-8")
#: what of a run's log is read back: its start (the phases up to ready) and its end (how it ended)
HEAD_BYTES = 1 << 20
TAIL_BYTES = 4 << 20
#: the default log cap on disk (DeploymentConfig.log_max_mib)
LOG_MAX_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class LogFile:
    """One file of a run's log, in the order written (head, previous, live), with its size when looked at."""

    path: str
    size: int


@dataclass(frozen=True, slots=True)
class Piece:
    """A byte range of one log file to read: `count` bytes from `start`; `at_line_start`: it begins at a file's start,
    else its first line may be partial and is dropped."""

    path: str
    start: int
    count: int
    at_line_start: bool


def plan_read(files: Sequence[LogFile], head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> tuple[list[Piece], int]:
    """The pieces that make the first `head` and last `tail` bytes of the log's files, in order, and how many bytes
    between them are left out. Pure, so the bounds are tested without a big file."""
    total = sum(f.size for f in files)
    if total <= head + tail:
        return [Piece(f.path, 0, f.size, True) for f in files if f.size], 0
    first = next(f for f in files if f.size)
    pieces = [Piece(first.path, 0, min(head, first.size), True)]
    back: list[Piece] = []
    need = tail
    for f in reversed(files):
        if need <= 0 or not f.size:
            continue
        floor = pieces[0].count if f.path == first.path else 0  # never the head's bytes twice
        start = max(floor, f.size - need)
        if start < f.size:
            back.append(Piece(f.path, start, f.size - start, start == 0))
            need -= f.size - start
        if f.path == first.path:
            break
    pieces += reversed(back)
    return pieces, total - sum(p.count for p in pieces)


def parse_log_line(raw: str, invocation: str) -> LogLine | None:
    """`<epoch> <text>` as the supervisor writes it; None for anything else. The stamp is taken as the one number
    parser takes a moment (tui/guard/numbers.py): digits, finite, between 1970 and 2200; a line cut by anything but
    a real line end (tui/guard/text.py) never gets here, so the server never picks a stamp."""
    ts, sep, text = raw.partition(" ")
    at = real_or_none(ts, low=EPOCH_MIN, high=EPOCH_MAX, text=True)
    if at is None:
        return None
    return LogLine(at=at, text=text if sep else "", invocation=invocation)


def _moment(value: object) -> float | None:
    """A moment of the run record (the supervisor's own clock): finite and in range, else not known."""
    return real_or_none(value, low=EPOCH_MIN, high=EPOCH_MAX)


def _pid(value: object) -> int:
    """A PID of the run record: a positive int, else 0 (none)."""
    return whole_or_none(value, low=1, high=1 << 22) or 0


class ProcessManager:
    kind = "process"
    can_control = True
    sees_run = True

    def __init__(self, transport: Transport, run_dir: str, command: Sequence[str], env: dict[str, str],
                 *, stop_timeout: float = 60.0, python: str | None = None, log_max_bytes: int = LOG_MAX_BYTES) -> None:
        self.transport = transport
        self.log_max_bytes = log_max_bytes
        self.run_dir = run_dir
        self.command = list(command)
        self.env = dict(env)
        self.stop_timeout = stop_timeout
        self.python = python or (sys.executable if transport.name == "local" else "python3")
        self.target = f"process {describe_command(self.command)}"
        #: the server's PID at the last reading of its state, whose /proc stat is read with the run's records
        self._pid_seen = 0

    def _p(self, name: str) -> str:
        return f"{self.run_dir}/{name}"

    async def _read_json(self, name: str) -> Any:
        return _json(await self.transport.read_file(self._p(name)))

    async def _write(self, name: str, data: bytes) -> None:
        """Here: a file created 0600 in the 0700 run directory (the transport's write takes the umask's mode, 0644).
        On another host the transport writes it, in the directory the supervisor keeps 0700."""
        if self.transport.name != "local":
            await self.transport.write_file(self._p(name), data)
            return
        try:
            await asyncio.to_thread(write_private, self._p(name), data)
        except OSError as e:
            raise ManagerError(f"cannot write {self._p(name)}: {e.strerror or e}") from None

    async def state(self) -> UnitState:
        # the run record, the server's /proc/PID/stat and the stop record are read in one go, in that order (the
        # order of the reads one by one below), with the PID of the last reading: a reading a second is then one
        # wake-up of the loop and of a thread, not three. A record that names another process reads it again.
        seen = self._pid_seen
        got = await self.transport.read_files(
            [self._p("current.json"), f"/proc/{seen}/stat", self._p("stop.json")] if seen > 0
            else [self._p("current.json")])
        rec = _json(got[0])
        if not isinstance(rec, dict) or not rec.get("invocation"):
            return UnitState(active="inactive", sub="dead")
        inv = str(rec["invocation"])
        argv = tuple(str(a) for a in rec.get("argv") or ())
        started = _moment(rec.get("started_at"))
        batched = len(got) == 3

        async def stop_asked() -> bool:
            stop = _json(got[2]) if batched else await self._read_json("stop.json")
            return isinstance(stop, dict) and stop.get("invocation") == inv

        if rec.get("exited_at") is None:
            pid = _pid(rec.get("pid"))
            supervisor = _pid(rec.get("supervisor_pid"))
            batched = batched and pid == seen  # what was read in one go was another process's: read one by one
            self._pid_seen = pid
            alive = stat_alive(got[1]) if batched else await process_alive(self.transport, pid)
            if alive or (pid == 0 and await process_alive(self.transport, supervisor)):
                if await stop_asked():
                    # asked to stop and not gone yet: stopping, as systemd says "deactivating" (a `status` in
                    # that moment read the ready run's failing probe as warmup)
                    return UnitState(active="deactivating", sub="stop-sigterm", main_pid=pid, invocation=inv,
                                     started_at=started, argv=argv)
                return UnitState(active="active", sub="running", main_pid=pid, invocation=inv, started_at=started,
                                 argv=argv)
            batched = False  # the stop record is read after the supervisor's stat, as one by one
            if await process_alive(self.transport, supervisor):
                # the server has exited and its supervisor is writing down how: not a run lost (a `status` in
                # that moment of a clean stop read "failed ... lost"). A stop was asked: "deactivating", as systemd
                # says; none was: the run is still the running one until its exit status is in, never a stop (a
                # server that died at once, read in that moment, was taken for one stopped cleanly, with no failure)
                if await stop_asked():
                    return UnitState(active="deactivating", sub="stop", invocation=inv, started_at=started, argv=argv)
                return UnitState(active="active", sub="exiting", main_pid=pid, invocation=inv, started_at=started,
                                 argv=argv)
            return UnitState(active="failed", sub="lost", invocation=inv, started_at=started, argv=argv)
        status = whole_or_none(rec.get("exit_status"), low=-255, high=255)
        asked = await stop_asked()
        ok = asked or status == 0
        return UnitState(active="inactive" if ok else "failed", sub="dead" if ok else "exited",
                         invocation=inv, exit_status=status, started_at=started,
                         exited_at=_moment(rec.get("exited_at")), argv=argv)

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        cur = await self.state()
        if cur.active in ("active", "activating", "deactivating"):
            raise ManagerError(f"already running (pid {cur.main_pid}); stop it first")
        inv = uuid.uuid4().hex
        # the supervisor's source goes in on stdin (`python3 -`), so `ps` shows its arguments, not its code; the
        # environment goes in with it, never in argv, where any user's `ps` reads a token for the server's life
        source = f"PASSED_ENV_JSON = {json.dumps(self.env)!r}\n{_SUPERVISOR}"
        res = await self.transport.run(
            [self.python, "-", self.run_dir, inv, json.dumps(list(argv)), str(self.stop_timeout),
             str(self.log_max_bytes)], timeout=20, input=source.encode())
        if res.rc != 0:
            raise ManagerError(f"could not start the supervisor: {res.error_text or res.rc}")
        for _ in range(100):  # the supervisor writes its record a few ms after detaching
            rec = await self._read_json("current.json")
            if isinstance(rec, dict) and rec.get("invocation") == inv:
                if not _pid(rec.get("pid")) and rec.get("exited_at") is not None:
                    raise PermanentManagerError(await self._start_error(rec, inv, argv))
                return
            await asyncio.sleep(0.05)
        raise ManagerError("the supervisor did not report the server's start within 5 s")

    async def _start_error(self, rec: dict[str, Any], inv: str, argv: Sequence[str]) -> str:
        """Why the supervisor could not start the server (it had no process at all), in one line naming the
        command and the OS's error: from its record, else the log line it wrote."""
        why = rec.get("start_error")
        if isinstance(why, str) and why:
            return why
        for line in reversed(await self.read_log(inv)):
            if line.text.startswith("bringup: cannot start"):
                return line.text.removeprefix("bringup: ")
        return f"cannot start {argv[0] if argv else '?'!r} (exit status {rec.get('exit_status')})"

    async def stop(self, report: Report = unreported) -> None:
        rec = await self._read_json("current.json")
        cur = await self.state()
        if cur.active not in ("active", "activating", "deactivating") or not isinstance(rec, dict):
            return
        await self._write("stop.json", json.dumps({"invocation": cur.invocation, "at": time.time()}).encode())
        sup = _pid(rec.get("supervisor_pid"))
        if sup > 0:
            await self.transport.run(["kill", "-TERM", str(sup)], timeout=5)
        deadline = time.monotonic() + self.stop_timeout + 5
        while time.monotonic() < deadline:
            if (await self.state()).active not in ("active", "activating", "deactivating"):
                return
            await asyncio.sleep(0.2)
        if cur.main_pid > 0:
            await self.transport.run(["kill", "-KILL", f"-{cur.main_pid}"], timeout=5)
        raise ManagerError(f"the server did not stop within {self.stop_timeout:g} s; killed it")

    async def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        """The invocation's log so far, then new lines while it runs (tail -F ends when we stop reading). So far is
        bounded as `read_log`'s (the run's head and the live file's end) once the log is long or rotated; the live
        file is then followed from the byte the read ended at."""
        rec = await self._read_json("current.json")
        if not isinstance(rec, dict) or rec.get("invocation") != unit.invocation:
            return
        log = str(rec["log"])
        files = await self._log_files(unit.invocation)
        if sum(f.size for f in files) <= HEAD_BYTES + TAIL_BYTES and all(f.path == log for f in files):
            argv = ["tail", "-n", "+1", "-F", log]
        else:
            for old in await self._read_bounded(unit.invocation, files):
                yield old
            live = next((f.size for f in files if f.path == log), 0)
            argv = ["tail", "-c", f"+{live + 1}", "-F", log]
        async with contextlib.aclosing(self.transport.stream(argv)) as raws:
            async for raw in raws:
                line = parse_log_line(raw, unit.invocation)
                if line is not None:
                    yield line

    def log_source(self, invocation: str) -> str:
        return f"{self.run_dir}/logs/{invocation}.log"

    async def _log_files(self, invocation: str) -> list[LogFile]:
        """The run's log files that exist, in the order written, with their sizes now (one `stat`)."""
        base = self.log_source(invocation)
        paths = [f"{base}.head", f"{base}.1", base]
        res = await self.transport.run(["stat", "-L", "-c", "%s %n", "--", *paths], timeout=10)
        sizes: dict[str, int] = {}
        for raw in split_lines(res.text):
            size, _, name = raw.partition(" ")
            if (n := whole_or_none(size, low=0, text=True)) is not None:
                sizes[name] = n
        return [LogFile(p, sizes[p]) for p in paths if p in sizes]

    async def _read_piece(self, piece: Piece) -> bytes:
        res = await self.transport.run(["dd", f"if={piece.path}", "iflag=skip_bytes,count_bytes",
                                        f"skip={piece.start}", f"count={piece.count}", "bs=1M", "status=none"],
                                       timeout=60)
        if res.rc != 0:
            return b""  # gone since it was looked at (rotated away): what is left still reads
        data = res.stdout
        if not piece.at_line_start:
            data = data[data.find(b"\n") + 1:]
        cut = data.rfind(b"\n")  # a line still being written, or cut by the bound: only whole lines
        return data[:cut + 1]

    async def _read_bounded(self, invocation: str, files: Sequence[LogFile]) -> list[LogLine]:
        pieces, skipped = plan_read(files)
        out: list[LogLine] = []
        for i, piece in enumerate(pieces):
            if i == 1 and skipped:
                at = out[-1].at if out else 0.0
                out.append(LogLine(at=at, text=f"bringup: {skipped / 2**20:.1f} MiB of this run's output between "
                                               "its start and its end not read back here (only its first "
                                               f"{HEAD_BYTES >> 20} MiB and last {TAIL_BYTES >> 20} MiB are); "
                                               f"the whole log: {self.log_source(invocation)}",
                                   invocation=invocation))
            for raw in split_lines((await self._read_piece(piece)).decode("utf-8", "replace")):
                line = parse_log_line(raw, invocation)
                if line is not None:
                    out.append(line)
        return out

    async def read_log(self, invocation: str) -> list[LogLine]:
        """A run's log, bounded: its first and last bytes (module docstring), whatever the server wrote."""
        return await self._read_bounded(invocation, await self._log_files(invocation))

    async def pids(self, unit: UnitState) -> set[int] | None:
        """The server runs in its own process group (the supervisor starts it in a new session)."""
        if not unit.running or unit.main_pid <= 0:
            return set()
        res = await self.transport.run(["pgrep", "-g", str(unit.main_pid)], timeout=5)
        if res.rc not in (0, 1):
            return None
        return {n for x in res.text.split() if (n := whole_or_none(x, low=1, text=True)) is not None} | {unit.main_pid}

    async def read_argv(self) -> list[str]:
        saved = await self._read_json("argv.json")
        if isinstance(saved, list) and all(isinstance(a, str) for a in saved) and saved:
            return saved
        return list(self.command)

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None:
        await self.save_argv("previous", await self.read_argv())
        await self._write("argv.json", json.dumps(list(argv)).encode())

    async def read_saved_argv(self, which: str) -> list[str] | None:
        saved = await self._read_json(f"argv.{which}.json")
        return saved if isinstance(saved, list) else None

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        await self._write(f"argv.{which}.json", json.dumps(list(argv)).encode())

    def lock(self, purpose: str, change: str = "") -> FileLock:
        if self.transport.name != "local":
            raise PermanentManagerError("the process manager runs servers on this machine only (host = 'local'): use "
                                        "manager = 'systemd' for a remote host")
        return FileLock(self._p("restart.lock"), purpose, change)


def _json(data: bytes | None) -> Any:
    """A record's JSON; None when it is not there or not (yet) whole."""
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None
