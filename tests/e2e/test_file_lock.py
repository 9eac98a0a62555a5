"""The local lock (the `process` manager's, tui/managers/file_lock.py): opened without following a link, kept
0600, and a holder that is no bringup named by pid and user instead of read as a bringup without a record."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui.managers import LockHeld, PermanentManagerError
from tui.managers.file_lock import FileLock


async def test_a_link_at_the_locks_path_is_refused_and_nothing_is_written_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    lock = tmp_path / "restart.lock"
    lock.symlink_to(victim)
    with pytest.raises(PermanentManagerError, match="symbolic link"):
        async with FileLock(str(lock), "restart"):
            pass
    assert victim.read_text() == "precious\n"
    assert await FileLock(str(lock), "watch").holder() is None  # read without following it either


async def test_the_lock_is_0600_even_when_an_older_bringup_made_it_0644(tmp_path: Path) -> None:
    path = tmp_path / "restart.lock"
    async with FileLock(str(path), "restart"):
        assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o644)
    async with FileLock(str(path), "restart"):
        assert path.stat().st_mode & 0o777 == 0o600


def _hold(argv: list[str], path: Path) -> subprocess.Popen[bytes]:
    """A process that takes the lock, once it holds it (seen in the kernel's tables, never by trying it)."""
    proc = subprocess.Popen(argv)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists() and f":{path.stat().st_ino} " in Path("/proc/locks").read_text():
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the holder never took the lock")


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) not installed")
async def test_a_holder_that_is_no_bringup_is_named_by_pid_and_user(tmp_path: Path) -> None:
    path = tmp_path / "restart.lock"
    path.touch()
    holder = _hold(["flock", "-n", str(path), "sleep", "60"], path)
    try:
        with pytest.raises(LockHeld) as e:
            async with FileLock(str(path), "restart"):
                pass
        msg = str(e.value)
        assert f"held by pid {holder.pid} (user {getpass.getuser()}: flock -n {path} sleep 60)" in msg, msg
        assert "which is not a bringup; it left no record" in msg
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) not installed")
async def test_a_bringup_holding_it_is_still_named_as_a_bringup(tmp_path: Path) -> None:
    path = tmp_path / "restart.lock"
    code = ("import asyncio, sys\nfrom tui.managers.file_lock import FileLock\n"
            "async def main():\n    async with FileLock(sys.argv[1], 'restart other'):\n"
            "        await asyncio.sleep(60)\n"
            "asyncio.run(main())\n")
    holder = _hold([sys.executable, "-c", code, str(path)], path)
    try:
        deadline = time.monotonic() + 10
        while not path.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(LockHeld, match=rf"another bringup is already restarting this deployment: \S+ \(pid "
                                           rf"{holder.pid}\) restart other"):
            async with FileLock(str(path), "restart"):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert os.path.exists(path)
