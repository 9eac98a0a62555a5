"""Shared by the benchmarks that watch a program in a real terminal: a process's CPU time and RSS from /proc, an
isolated environment for `bringup demo`, and a detached tmux session to start, read and type into.
Stdlib only: it also runs on the GPU host, where only the wheels carried there are installed."""

from __future__ import annotations

import os
import socket
import subprocess
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
        """Seconds until pred(screen) holds, polling as fast as tmux answers; None after `timeout`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if pred(self.screen()):
                return time.monotonic() - t0
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
