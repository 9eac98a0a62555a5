"""The processes a test leaves behind: every simulated server, supervisor of one, or `nvidia-smi` stand-in is
started with the test's tmp dir on its command line, so a scan of /proc for that dir finds what the test started and
nothing that another test (or worker of a parallel run) did."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable

from tests.helpers.wait import slack


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def sim_processes(marker: str) -> list[tuple[int, str]]:
    """Live processes whose command line mentions `tui.sim` (servers, supervisors of servers, the nvidia-smi
    stand-in) and `marker` (the test's tmp path)."""
    out = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        cmd = _cmdline(int(entry))
        if "tui.sim" in cmd and marker in cmd and not _is_zombie(int(entry)):
            out.append((int(entry), cmd))
    return out


def wait_no_sim_processes(marker: str, timeout: float = 5.0) -> list[tuple[int, str]]:
    """Leftover processes after `timeout` seconds of grace (an exiting server takes a moment; stretched by
    `slack` on a busy machine)."""
    deadline = time.monotonic() + slack(timeout)
    while True:
        left = sim_processes(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def kill_processes(procs: Iterable[tuple[int, str]]) -> None:
    for pid, _ in procs:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)
