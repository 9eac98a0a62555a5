"""The detached supervisor behind the `process` manager. STDLIB ONLY: it is sent as `python3 -c SOURCE ...`
to whatever host runs the server, so it must not import bringup.

Why a supervisor and not a bare `Popen`: the server must outlive the bringup that started it (a CLI call, or a
console the user closes), someone must reap it and record its exit status, and every output line needs a wall
clock timestamp (like journald gives a systemd unit) so that a console attached later still shows true phase
durations. It double-forks away from the caller, runs the server in its own process group, prefixes each line of
its output with the time it was read, and writes `current.json` when the server starts and when it exits.

argv: RUN_DIR INVOCATION ARGV_JSON STOP_TIMEOUT LOG_MAX_BYTES

The server's environment (`env`: an HF_TOKEN) is never in argv, where every user of the host reads it through
`ps` for the server's whole life: the manager prepends `PASSED_ENV_JSON = '...'` to this source, which goes in on
stdin (`python3 -`), so it lives only in the supervisor's memory and the server's own environment (readable by its
user and root only, /proc/PID/environ).

Private by construction: the run directory and its `logs/` are made 0700 (an existing one of ours is tightened),
every file is created 0600 (os.open's mode, never a chmod after: no moment where another user can open it).

Bounded: the log is cut into segments of LOG_MAX_BYTES / 3. The first segment is kept whole as `<inv>.log.head`
(the server's start-up lines, which the lifecycle needs); later ones rotate through `<inv>.log.1` (one previous
file kept); the live file is always `<inv>.log`, and each new one begins with a line saying how much was dropped.
So the run's files never pass LOG_MAX_BYTES on disk, whatever the server prints (0: no cap).
"""

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

MAX_LINE = 65536
#: the smallest segment: a read of 64 KiB of one-byte lines stamped is ~1.3 MiB, and a rotation per read is no log
MIN_SEGMENT = 1 << 20
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def _write_json(path: str, obj: dict) -> None:
    write_private(path, json.dumps(obj).encode())


def write_private(path: str, data: bytes) -> None:
    """Atomically, as a file created 0600 in a 0700 directory (bringup's own records: argv, the stop request)."""
    private_dir(os.path.dirname(path) or ".")
    tmp = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, _CREATE | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def private_dir(path: str) -> None:
    """`path` and any missing parent made 0700; `path` itself must then be a real directory (not a link) of ours or
    root's that no other user can write, else the supervisor stops with the reason (bringup's guard/files.py rule,
    kept here in stdlib: this runs alone on the host). One of ours that others can enter is tightened, through a
    descriptor opened without following a link. A parent that existed is never touched: it is someone's choice (as
    root, tightening the first existing parent of `/tmp/x/run` made `/tmp` 0700 and dropped its sticky bit)."""
    _make_missing(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid not in (os.geteuid(), 0) or st.st_mode & 0o022:
            raise PermissionError(f"refusing to use {path}: owned by uid {st.st_uid} or writable by others "
                                  f"(mode {stat.S_IMODE(st.st_mode):04o})")
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o700)
    finally:
        os.close(fd)


def _make_missing(path: str) -> None:
    if os.path.lexists(path):
        return
    parent = os.path.dirname(path.rstrip("/"))
    if parent and parent != path:
        _make_missing(parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)


class SegmentedLog:
    """The run's log, capped on disk: the head segment kept, one previous segment, the live file (see above)."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.segment = max(MIN_SEGMENT, max_bytes // 3) if max_bytes > 0 else 0
        self.fd = os.open(path, _CREATE | os.O_APPEND, 0o600)
        self.size = os.fstat(self.fd).st_size
        self.dropped = 0

    def write(self, data: bytes) -> None:
        if self.segment and self.size and self.size + len(data) > self.segment:
            self._rotate()
        os.write(self.fd, data)
        self.size += len(data)

    def _rotate(self) -> None:
        head, prev = self.path + ".head", self.path + ".1"
        if not os.path.exists(head):
            os.rename(self.path, head)
            note = (f"bringup: log continues here; the run's first lines are in {os.path.basename(head)} "
                    f"(log cap {self.segment * 3} bytes)")
        else:
            with contextlib.suppress(OSError):
                self.dropped += os.stat(prev).st_size
            os.replace(self.path, prev)
            note = (f"bringup: log continues here after {os.path.basename(prev)} (the previous part); "
                    f"{self.dropped} bytes of output before that were dropped by the log cap "
                    f"({self.segment * 3} bytes on disk)")
        os.close(self.fd)
        self.fd = os.open(self.path, _CREATE | os.O_APPEND | os.O_EXCL, 0o600)
        self.size = 0
        os.write(self.fd, f"{time.time():.6f} {note}\n".encode())


def _supervise(run_dir: str, invocation: str, argv: list, env: dict, stop_timeout: float, log_max: int) -> None:
    log_dir = os.path.join(run_dir, "logs")
    private_dir(log_dir)
    log_path = os.path.join(log_dir, invocation + ".log")
    record_path = os.path.join(run_dir, "current.json")
    started = time.time()
    record = {"invocation": invocation, "argv": argv, "log": log_path, "started_at": started,
              "supervisor_pid": os.getpid(), "pid": 0, "exited_at": None, "exit_status": None}
    log = SegmentedLog(log_path, log_max)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **env})
    except OSError as e:
        # no process at all: the record says why (pid 0, status 127, as a shell says "command not found"), and the
        # manager's start fails with it instead of reporting a run that never had a process
        why = f"cannot start {argv[0]!r}: {e.strerror or e}"
        if os.sep in argv[0] and not os.path.isabs(argv[0]):
            why += f" (relative to {os.getcwd()})"
        log.write(f"{time.time():.6f} bringup: {why}\n".encode())
        record.update(exited_at=time.time(), exit_status=127, start_error=why)
        _write_json(record_path, record)
        return
    record["pid"] = proc.pid
    _write_json(record_path, record)

    def on_term(signum: int, frame: object) -> None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            return
        deadline = time.time() + stop_timeout
        signal.signal(signal.SIGALRM, lambda *_: _kill_group(proc.pid))
        signal.setitimer(signal.ITIMER_REAL, max(0.1, deadline - time.time()))

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    partial = b""
    split = re.compile(rb"\r\n|\r|\n")
    while True:
        try:
            data = os.read(fd, 65536)
        except InterruptedError:
            continue
        if not data:
            break
        now = f"{time.time():.6f} ".encode()
        parts = split.split(partial + data)
        partial = parts.pop()
        if len(partial) > MAX_LINE:
            parts.append(partial[:MAX_LINE])
            partial = b""
        out = b"".join(now + p + b"\n" for p in parts if p)
        if out:
            log.write(out)
    if partial:
        log.write(f"{time.time():.6f} ".encode() + partial + b"\n")
    status = proc.wait()
    _kill_group(proc.pid)  # children the server left behind
    record.update(exited_at=time.time(), exit_status=status)
    _write_json(record_path, record)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def main() -> None:
    run_dir, invocation, argv_json, stop_timeout, log_max = sys.argv[1:6]
    env = json.loads(globals().get("PASSED_ENV_JSON") or "{}")
    private_dir(run_dir)
    pid = os.fork()
    if pid:
        # the caller's child: report the supervisor pid once it has detached, then return at once
        os.waitpid(pid, 0)
        return
    os.setsid()
    pid2 = os.fork()
    if pid2:
        sys.stdout.write(f"{pid2}\n")
        sys.stdout.flush()
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        _supervise(run_dir, invocation, json.loads(argv_json), env, float(stop_timeout), int(log_max))
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
