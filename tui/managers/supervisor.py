"""The detached supervisor behind the `process` manager. STDLIB ONLY: it is sent as `python3 -c SOURCE ...`
to whatever host runs the server, so it must not import bringup.

Why a supervisor and not a bare `Popen`: the server must outlive the bringup that started it (a CLI call, or a
console the user closes), someone must reap it and record its exit status, and every output line needs a wall
clock timestamp (like journald gives a systemd unit) so that a console attached later still shows true phase
durations. It double-forks away from the caller, runs the server in its own process group, prefixes each line of
its output with the time it was read, and writes `current.json` when the server starts and when it exits.

argv: RUN_DIR INVOCATION ARGV_JSON ENV_JSON STOP_TIMEOUT
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

MAX_LINE = 65536


def _write_json(path: str, obj: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def _supervise(run_dir: str, invocation: str, argv: list, env: dict, stop_timeout: float) -> None:
    log_dir = os.path.join(run_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, invocation + ".log")
    record_path = os.path.join(run_dir, "current.json")
    started = time.time()
    record = {"invocation": invocation, "argv": argv, "log": log_path, "started_at": started,
              "supervisor_pid": os.getpid(), "pid": 0, "exited_at": None, "exit_status": None}
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the supervisor
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
    run_dir, invocation, argv_json, env_json, stop_timeout = sys.argv[1:6]
    os.makedirs(run_dir, exist_ok=True)
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
        _supervise(run_dir, invocation, json.loads(argv_json), json.loads(env_json), float(stop_timeout))
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
