"""Shared by the benchmarks that watch a program in a real terminal: a process's CPU time and RSS from /proc, an
isolated environment for `bringup demo`, a detached tmux session to start, read and type into, and a bare
pseudo-terminal whose output is read as it is written.
Stdlib only: it also runs on the GPU host, where only the wheels carried there are installed."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process itself (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_parts(pid: int) -> dict[str, float]:
    """RSS split as the kernel counts it: anonymous memory (the process's own: Python objects, malloc arenas, what a
    library allocated), file pages (shared libraries and modules mapped from disk, shared with other processes that
    map them), shared memory; and the number of threads (each may hold a malloc arena of its own)."""
    keys = {"RssAnon": "anon_mib", "RssFile": "file_mib", "RssShmem": "shmem_mib"}
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in keys:
            out[keys[key]] = round(int(value.split()[0]) / 1024, 1)
        elif key == "Threads":
            out["threads"] = int(value)
    return out


#: an anonymous mapping this large is a thread's malloc arena (64 MiB reserved, part of it in use and mapped)
ARENA_SPAN = 32 << 20


def rss_by_mapping(pid: int, top: int = 12) -> list[tuple[str, float]]:
    """Where the RSS is, by what is mapped (a library's path, `[heap]`, `[anon]` for anonymous mappings): MiB each,
    largest first."""
    sizes: dict[str, int] = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            name = head[5].strip() if len(head) == 6 else "[anon]"
            name = name.rsplit("/", 1)[-1] if name.startswith("/") else name
            lo, _, hi = head[0].partition("-")
            if name == "[anon]" and int(hi, 16) - int(lo, 16) >= ARENA_SPAN:
                # glibc gives each thread that allocates a heap of its own, reserved 64 MiB at a time
                name = "[anon: 64 MiB reservations, threads' malloc arenas]"
        elif line.startswith("Rss:"):
            sizes[name] = sizes.get(name, 0) + int(line.split()[1])
    return [(k, round(v / 1024, 1)) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:top]]


def demo_env(home: str) -> dict[str, str]:
    """HOME, state and config under `home`, and a free loopback port for the demo: runs never share state."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {**os.environ, "HOME": home, "XDG_STATE_HOME": f"{home}/state", "XDG_CONFIG_HOME": f"{home}/cfg",
            "BRINGUP_DEMO_PORT": str(port), "TERM": "xterm-256color"}


class Tmux:
    """One detached session of a tmux server on its own socket."""

    def __init__(self, sock: str, env: dict[str, str], cwd: str, command: str, *, size: tuple[int, int],
                 session: str = "b") -> None:
        self.base = ["tmux", "-S", sock]
        self.session = session
        subprocess.run([*self.base, "new-session", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]),
                        "-c", cwd, command], env=env, check=True)

    def screen(self) -> str:
        """The pane as text, wrapped lines joined."""
        return subprocess.run([*self.base, "capture-pane", "-p", "-J", "-t", self.session], capture_output=True,
                              text=True).stdout

    def wait_for(self, pred: Callable[[str], bool], timeout: float) -> float | None:
        """Seconds until pred(screen) holds, or None after `timeout`. Polls every 10 ms: a tighter loop of tmux
        clients would take CPU from the program it times."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if pred(self.screen()):
                return time.monotonic() - t0
            time.sleep(0.01)
        return None

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", self.session, *keys], check=True)

    def pid(self) -> int:
        return int(subprocess.run([*self.base, "display-message", "-p", "-t", self.session, "#{pane_pid}"],
                                  capture_output=True, text=True).stdout)

    def alive(self) -> bool:
        return subprocess.run([*self.base, "has-session", "-t", self.session], capture_output=True).returncode == 0

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


class Pty:
    """A program in its own pseudo-terminal of a fixed size, its output read as it is written.

    No terminal emulator: what `wait_for` times is the program writing the bytes that draw something, not a
    terminal parsing them (tmux, on a 2-core machine also running the server, adds its own share). `on_output`,
    if given, sees every chunk, in the reading thread."""

    def __init__(self, argv: list[str], env: dict[str, str], *, rows: int = 40, cols: int = 120,
                 cwd: str | None = None, on_output: Callable[[bytes], None] | None = None) -> None:
        self.argv = argv
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            if cwd:
                os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        self.bytes = 0
        self._on_output = on_output
        self._since = bytearray()  # output since the last mark(), for wait_for
        self._cond = threading.Condition()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.bytes += len(data)
            if self._on_output is not None:
                self._on_output(data)
            with self._cond:
                self._since += data
                del self._since[:-262144]  # a needle is found in the latest output: keep 256 KiB of it
                self._cond.notify_all()

    def mark(self) -> None:
        """From now on, wait_for looks only at output written after this call."""
        with self._cond:
            self._since.clear()

    def wait_for(self, needle: bytes, timeout: float) -> float | None:
        """Seconds until the output since the last mark() contains `needle`; None after `timeout`."""
        t0 = time.monotonic()
        with self._cond:
            while needle not in self._since:
                left = timeout - (time.monotonic() - t0)
                if left <= 0:
                    return None
                self._cond.wait(left)
        return time.monotonic() - t0

    def keys(self, data: bytes) -> None:
        os.write(self.fd, data)

    def alive(self) -> bool:
        return os.waitpid(self.pid, os.WNOHANG) == (0, 0)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s."""
        try:
            os.kill(self.pid, signal.SIGTERM)
            for _ in range(50):
                if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                    return
                time.sleep(0.1)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
