"""Commands on this machine, each in its own process group so a cancelled stream leaves no orphans."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import time
from collections.abc import AsyncGenerator, Mapping, Sequence

from tui.guard.files import FILE_MODE, UnsafeLocation, write_private
from tui.transport import CommandResult, PermanentTransportError, TransportError
from tui.transport.lines import LineSplitter

#: the commands this process has running, by process group (each leads its own): killed all at once when the
#: terminal goes away, and waited for when a command's loop closes
LIVE_GROUPS: dict[int, asyncio.subprocess.Process] = {}

#: the longest line a stream delivers whole (both transports). A journal record (`journalctl -o json`) is one line,
#: and one ESC byte makes journald send MESSAGE as an array of byte values, about four times the text: a 20 KB
#: traceback line is an 81 KB record, which a 64 KiB bound cut and the JSON parser then dropped. Longer lines are
#: cut here (the journal parser keeps what identifies a cut record and says it was cut); the readers bound the text
#: they keep themselves (tui/lifecycle/journal.py: MESSAGE at 64 Ki characters, lines.py: a log line at 16 Ki).
STREAM_MAX_LINE = 4 * 1024 * 1024


class StreamLines:
    """`LineSplitter` at `STREAM_MAX_LINE`, at a cost linear in a long line: bytes without a line end are held and
    handed to the splitter in one piece once the line ends (or passes the bound). Fed a 4 MiB line 64 KiB at a
    time, the splitter alone joins and scans its growing partial line each time: a second of the event loop's."""

    def __init__(self, max_line: int = STREAM_MAX_LINE) -> None:
        self._splitter = LineSplitter(max_line)
        self._max = max_line
        self._held: list[bytes] = []
        self._held_len = 0

    def feed(self, data: bytes) -> list[str]:
        if b"\n" not in data and b"\r" not in data and self._held_len + len(data) <= self._max:
            self._held.append(data)
            self._held_len += len(data)
            return []
        if self._held:
            data = b"".join((*self._held, data))
            self._held, self._held_len = [], 0
        return self._splitter.feed(data)

    def flush(self) -> list[str]:
        if self._held:
            held, self._held, self._held_len = b"".join(self._held), [], 0
            return [*self._splitter.feed(held), *self._splitter.flush()]
        return self._splitter.flush()


def kill_all_children() -> None:
    """TERM, then KILL, every command this process started and has not reaped (for hang-up and hard exits)."""
    groups = list(LIVE_GROUPS)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(g, sig)
        if sig == signal.SIGTERM and groups:
            time.sleep(0.2)
    LIVE_GROUPS.clear()


def _killpg(proc: asyncio.subprocess.Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


#: how long a reap waits for a group's leader after SIGKILL (a process in the kernel's uninterruptible sleep can
#: outlive it; the reap then gives up on it rather than hold the caller forever)
KILL_WAIT_S = 5.0


async def _reap(proc: asyncio.subprocess.Process, grace: float = 2.0) -> None:
    """TERM the whole group, then KILL it if it has not gone within `grace` seconds, and wait for the exit.

    It finishes even when cancelled, then raises the cancellation: a command that ends with its caller cancelled
    (Ctrl-C, a console quitting, the loop shutting down) must still be reaped by the loop that started it. Left
    half-done, asyncio finds the process after the loop has closed and prints it on the user's terminal ("Task was
    destroyed but it is pending", "Event loop is closed", or, when the transport's close reaps the child before the
    child watcher does, "Unknown child process pid N"). Callers await it directly: a shielded reap is a new task
    that a loop's shutdown never awaits. Bounded: `grace`, then KILL_WAIT_S; a process still not reaped then
    stays in LIVE_GROUPS, for the command's closing (tui/cli `run_async`) to wait on once more."""
    task = asyncio.current_task()
    cancelled = False

    async def exited(within: float) -> None:
        nonlocal cancelled
        deadline = time.monotonic() + within
        while proc.returncode is None and (left := deadline - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(proc.wait(), left)
            except TimeoutError:
                return
            except asyncio.CancelledError:
                cancelled = True
                if task is not None:
                    task.uncancel()

    if proc.returncode is None:
        _killpg(proc, signal.SIGTERM)
        await exited(grace)
    _killpg(proc, signal.SIGKILL)  # the leader and whatever in its group ignored SIGTERM or outlived it
    await exited(KILL_WAIT_S)
    if proc.returncode is not None:  # one not reaped yet stays known: the command's closing waits for it
        LIVE_GROUPS.pop(proc.pid, None)
    if cancelled:
        raise asyncio.CancelledError


#: a command that cannot be executed at all: no such program (or directory on its path), not executable, not a
#: program; running it again will not change that
_CANNOT_RUN = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.ENOEXEC})


def cannot_run(program: str, e: OSError) -> TransportError:
    """An exec that failed, as an error: permanent (`PermanentTransportError`, kind "cannot-run") when the program
    cannot be run at all, so that a caller says it at once instead of retrying it until a timeout (a missing
    `nvidia-smi` was waited on for the whole release timeout)."""
    msg = f"cannot run {program!r}: {e.strerror or e}"
    if e.errno in _CANNOT_RUN:
        return PermanentTransportError(msg, kind="cannot-run")
    return TransportError(msg)


class LocalTransport:
    name = "local"

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        return None if env is None else {**os.environ, **env}

    async def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: bytes | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
                env=self._env(env))
        except OSError as e:
            raise cannot_run(argv[0], e) from None
        LIVE_GROUPS[proc.pid] = proc
        try:
            out, err = await asyncio.wait_for(proc.communicate(input), timeout)
        except TimeoutError:
            await _reap(proc, 0.5)
            raise TransportError(f"{argv[0]!r} did not finish within {timeout:g} s") from None
        except BaseException:
            await _reap(proc, 0.5)
            raise
        LIVE_GROUPS.pop(proc.pid, None)
        return CommandResult(proc.returncode if proc.returncode is not None else -1, out, err)

    async def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncGenerator[str, None]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, start_new_session=True, env=self._env(env))
        except OSError as e:
            raise cannot_run(argv[0], e) from None
        assert proc.stdout is not None
        LIVE_GROUPS[proc.pid] = proc
        splitter = StreamLines()
        try:
            while True:
                data = await proc.stdout.read(65536)
                if not data:
                    for line in splitter.flush():
                        yield line
                    break
                for line in splitter.feed(data):
                    yield line
            await proc.wait()
        finally:
            await _reap(proc, 1.0)

    async def read_file(self, path: str) -> bytes | None:
        return await asyncio.to_thread(_read, path)

    async def read_files(self, paths: Sequence[str]) -> list[bytes | None]:
        return await asyncio.to_thread(lambda: [_read(p) for p in paths])

    async def write_file(self, path: str, data: bytes, *, mode: int = FILE_MODE) -> None:
        def _write() -> None:
            # through tui/guard/files.py: no link followed, a directory another user can write refused, the file
            # created `mode` (0600 unless the caller names why another program must read it)
            write_private(path, data, mode=mode)

        try:
            await asyncio.to_thread(_write)
        except UnsafeLocation as e:
            raise PermanentTransportError(f"cannot write {path}: {e}") from None
        except OSError as e:
            raise TransportError(f"cannot write {path}: {e.strerror or e}") from None

    async def close(self) -> None:
        return None


def _read(path: str) -> bytes | None:
    """A file's bytes, in a worker thread: a read on the loop would hang the console on a stuck filesystem (a state
    directory on NFS). `open`, not `Path`: pathlib interns each component of each path it parses, and /proc/PID
    names are new with every process."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        # ProcessLookupError (ESRCH): a /proc/PID file whose process exited between the open and the read. It
        # is a file that is gone, as it would have been a moment later; an error here failed `bringup restart`
        # when the process a lock record names exited while it was read
        return None
    except OSError as e:
        raise TransportError(f"cannot read {path}: {e.strerror or e}") from None
