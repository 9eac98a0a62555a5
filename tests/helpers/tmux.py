"""A terminal of the test's own: a tmux server on its own socket in the test's tmp dir, its screen read with
capture-pane and its keys pressed with send-keys; and the processes of this machine found by their command line."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.helpers.wait import slack, until

#: how long one tmux command may take on an idle machine
TMUX_S = 10.0


def procs_with(text: str) -> list[int]:
    """The processes whose command line holds `text` (not this one, nor a tmux)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and int(p.name) != os.getpid() and "tmux" not in cmd:
            out.append(int(p.name))
    return out


def ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


class Tmux:
    def __init__(self, tmp: Path) -> None:
        self.sock = str(tmp / "tmux.sock")
        self.session = "bringup-test"

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True,
                              timeout=slack(TMUX_S)).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def wait_for(self, text: str, timeout: float) -> float:
        """Until `text` is on the screen (`timeout` bounds the wait: stretched by slack); how long it took."""
        t0 = time.monotonic()
        until(lambda: f"{text!r} on screen:\n{self.screen()}", lambda: text in self.screen(), timeout, every=0.1)
        return time.monotonic() - t0
