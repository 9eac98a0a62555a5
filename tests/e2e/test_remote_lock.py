"""The restart lock on a real systemd host over real SSH, under faults: the lock lives in a command on the host
(flock), which a dropped connection ends. A restart that loses it takes it back only when nothing changed
meanwhile; when someone else restarted in between, it stops and says so (exit 5), never reporting the other run's
result as its own. Ctrl-C releases the lock and its record on the host.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.simdeploy import UNIT
from tests.helpers.testhost import bringup, invocation, texec
from tests.helpers.wait import slack, until

pytestmark = pytest.mark.slow
RECORD = f"/run/bringup/{UNIT}.lock.owner"
#: the restart into a server that never loads gives up after this: longer than the test takes, on a busy machine too
HANG_S = str(round(slack(300)))


def popen(cfg: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.Popen([sys.executable, "-m", "tui", "--config", str(cfg), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cfg.parent)


def read_until(proc: subprocess.Popen[str], needle: str, timeout: float = 60) -> str:
    """stdout lines up to and including the first one containing `needle`."""
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + slack(timeout)
    for line in proc.stdout:
        seen.append(line)
        if needle in line:
            return "".join(seen)
        if time.monotonic() > deadline:
            break
    ended = proc.poll()
    err = proc.stderr.read() if ended is not None and proc.stderr is not None else ""
    raise AssertionError(f"no {needle!r} in (exit status {ended}):\n{''.join(seen)}\n--- stderr ---\n{err}")


def local_locks_held(state: Path) -> list[Path]:
    """The lock files of bringup's state directory that some process holds (flock) now."""
    held = []
    for path in sorted(state.rglob("*.lock")):
        with open(path, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(path)
            else:
                fcntl.flock(f, fcntl.LOCK_UN)
    return held


def freeze(proc: subprocess.Popen[str], state: Path) -> None:
    """SIGSTOP `proc` at a moment it holds none of the state directory's local locks. Stopped while writing its
    history (a lock held for milliseconds), it blocked every other bringup on that deployment until it went on:
    on a loaded machine that moment came often enough that the other restart hung until its timeout."""
    def stopped_free() -> bool:
        proc.send_signal(signal.SIGSTOP)
        until("stopped", lambda: Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T", 10,
              every=0.005)
        if not local_locks_held(state):  # stopped, it takes none meanwhile
            return True
        proc.send_signal(signal.SIGCONT)
        return False

    until("a moment it holds no local lock", stopped_free, 30, every=0.02)


def drop_lock_holder() -> None:
    """What a dropped SSH connection does to the lock: sshd hangs up the holding command, flock is free."""
    texec("pkill", "-f", "sleep 2147483647")


def test_a_lock_lost_with_nothing_changed_is_taken_back_and_ctrl_c_releases_it(conf: Path) -> None:
    assert bringup(conf, "restart", "remote", "--yes").returncode == 0
    a = popen(conf, "restart", "remote", "--set", "scenario=hang-loading", "--yes", "--timeout", HANG_S)
    read_until(a, "] follow")
    drop_lock_holder()
    out = read_until(a, "taken back", timeout=30)
    assert "nothing changed meanwhile" in out
    held = json.loads(texec("cat", RECORD))
    assert held["pid"] == a.pid  # the record on the host is ours again
    a.send_signal(signal.SIGINT)
    _, err = a.communicate(timeout=slack(30))
    assert a.returncode == 130, err
    assert "Traceback" not in err and "interrupted: flags written" in err and "started, not yet ready" in err, err
    assert texec("cat", RECORD) == ""  # released: `bringup wait` elsewhere does not take it for a restart at work


def test_a_lock_lost_while_someone_else_restarts_is_superseded_not_their_result(conf: Path) -> None:
    assert bringup(conf, "restart", "remote", "--yes").returncode == 0
    a = popen(conf, "restart", "remote", "--set", "scenario=hang-loading", "--yes", "--timeout", HANG_S)
    read_until(a, "] follow")
    ours = invocation()
    freeze(a, conf.parent / "state")  # A cannot notice anything until B is done
    try:
        drop_lock_holder()
        b = bringup(conf, "restart", "remote", "--unset", "scenario", "--yes")
        assert b.returncode == 0, b.stdout + b.stderr  # the lock was free: B went ahead and reached ready
    finally:
        a.send_signal(signal.SIGCONT)
    out, err = a.communicate(timeout=slack(60))
    assert a.returncode == 5, out + err
    assert "remote: ready" not in out and "FAILED" not in err, out + err
    assert "superseded" in out + err or "changed meanwhile" in out + err, out + err
    assert invocation() != ours


def test_a_connection_dropped_while_waiting_for_gpu_memory_carries_on_under_the_lock_to_ready(
        conf: Path) -> None:
    """The dropped link frees the lock and takes the GPU readings away: neither is a reason to start early (no
    proof of release) nor to give up (nothing changed): the lock is taken back and the wait goes on."""
    assert bringup(conf, "restart", "remote", "--set", "scenario=oom-on-fast-restart", "--yes").returncode == 0
    a = popen(conf, "restart", "remote", "--yes")
    read_until(a, "waiting for GPU memory")
    texec("pkill", "-KILL", "-f", "sshd: .*@")  # every SSH session of the host: bringup's connection drops
    out, err = a.communicate(timeout=slack(180))
    assert a.returncode == 0, out + err
    assert "taken back: nothing changed meanwhile" in out, out
    assert "GPU memory released" in out and "out of memory" not in (out + err).lower(), out + err
