"""`bringup` commands started from a process that has loaded bringup's modules once (a fork server).

Why: the suite starts about 600 `bringup` commands; each spent a third of a CPU-second importing its modules
(pydantic, httpx, asyncio, bringup's own) before doing anything, about 200 of the suite's 560 CPU-seconds on a
2-core machine. Here one server per test worker imports them once; each command is a `fork()` of it that then runs
`tui.__main__.main()` with the test's argv, working directory, environment and file descriptors, and exits the way
`python -m tui` exits (its SystemExit, atexit handlers and non-daemon threads included). It is still a process of
its own, with its own pid, signals and exit status; what it does not exercise is the interpreter's start-up and the
module loading, which the tests of those (Ctrl-C while loading, `--help`, the console entry point, signals sent to a
command) keep doing through a real `python -m tui` (`Bringup.popen`, and `run(..., fresh=True)`).

A command whose environment differs from the server's in what the interpreter reads at its own start-up (PYTHON*,
the locale) is started the real way: those would not reach a fork.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: what the interpreter reads from the environment as it starts, and a fork would not
_START_UP_ENV = ("PYTHON", "LC_", "LANG")

_SERVER = r"""
import gc, json, os, select, socket, sys
sock_path = sys.argv[1]
import tui.__main__
import tui.cli  # what tui.__main__.main() imports: loaded once, here
gc.freeze()
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sock_path)
srv.listen(64)
print("ready", flush=True)
waiting = {}  # pid -> the connection its exit status goes back on
child = False
while not child:
    ready, _, _ = select.select([srv, sys.stdin], [], [], 0.02 if waiting else None)
    if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
        break  # the test worker is gone
    if srv in ready:
        conn, _ = srv.accept()
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        req = json.loads(msg)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child = True
            srv.close()
            conn.close()
            for other in waiting.values():
                other.close()
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
                os.close(fd)
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            sys.argv = [tui.__main__.__file__, *req["args"]]
            break
        for fd in fds:
            os.close(fd)
        conn.sendall(b"%d\n" % pid)
        waiting[pid] = conn
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
            except OSError:
                pass
            conn.close()
if not child:  # the test worker is gone: the socket and its directory go with this server, not left in /tmp
    srv.close()
    for path, remove in ((sock_path, os.unlink), (os.path.dirname(sock_path), os.rmdir)):
        try:
            remove(path)
        except OSError:
            pass
if child:
    del srv, waiting
    tui.__main__.main()  # exits as `python -m tui` does: its SystemExit ends this interpreter
"""


class Preloaded:
    """One fork server for this process (a test worker): started on first use, gone with the worker."""

    _lock = threading.Lock()
    _instance: Preloaded | None = None

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="bringup-forks-")
        self.socket = os.path.join(self._dir, "s")
        self.env = dict(os.environ)
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, self.socket], cwd=ROOT, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the bringup fork server did not start: {line!r}")

    @classmethod
    def get(cls) -> Preloaded:
        with cls._lock:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls()
            return cls._instance

    @classmethod
    def pid(cls) -> int | None:
        """The server's pid while it runs: a child of this process that is the tests' and not the code's under test."""
        with cls._lock:
            inst = cls._instance
            return inst.proc.pid if inst is not None and inst.proc.poll() is None else None

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a fork gets what a fresh interpreter with `env` would: the same start-up variables."""
        def start_up(e: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in e.items() if k.startswith(_START_UP_ENV)}
        return start_up(env) == start_up(self.env)

    def start(self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Forked:
        return Forked(self, list(args), cwd, dict(env))


class Forked:
    """A command forked from the server: `pid`, and `communicate(timeout)` / `kill()` as subprocess.Popen has."""

    def __init__(self, server: Preloaded, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.conn.connect(server.socket)
            socket.send_fds(self.conn, [json.dumps({"args": args, "cwd": str(cwd), "env": env}).encode()],
                            [devnull, out_w, err_w])
        finally:
            for fd in (devnull, out_w, err_w):
                os.close(fd)
        self._answers = self.conn.makefile("rb")
        self.args = args
        self.pid = int(self._answers.readline())
        self.returncode: int | None = None
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._readers = [threading.Thread(target=self._drain, args=(fd, sink), daemon=True)
                         for fd, sink in ((out_r, self._out), (err_r, self._err))]
        for t in self._readers:
            t.start()
        self._done = threading.Event()
        threading.Thread(target=self._wait, daemon=True).start()

    @staticmethod
    def _drain(fd: int, sink: list[bytes]) -> None:
        with os.fdopen(fd, "rb") as f:
            while chunk := f.read1(65536):
                sink.append(chunk)

    def _wait(self) -> None:
        line = self._answers.readline()  # its exit status, once the server has reaped it
        self.returncode = int(line) if line.strip() else -signal.SIGKILL
        self.conn.close()
        for t in self._readers:
            t.join()
        self._done.set()

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """Its stdout and stderr once it has exited and closed them; TimeoutExpired as subprocess raises it."""
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(["bringup", *self.args], timeout or 0)
        return b"".join(self._out), b"".join(self._err)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
