"""The local lock (the `process` manager's, tui/managers/file_lock.py): opened without following a link, kept
0600, and a holder that is no bringup named by pid and user instead of read as a bringup without a record."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.wait import until
from tui.managers import LockHeld
from tui.managers.file_lock import FileLock


def _hold(argv: list[str], path: Path) -> subprocess.Popen[bytes]:
    """A process that takes the lock, once it holds it (seen in the kernel's tables, never by trying it)."""
    proc = subprocess.Popen(argv)
    try:
        until("the holder to take the lock",
              lambda: path.exists() and f":{path.stat().st_ino} " in Path("/proc/locks").read_text(), 10)
    except AssertionError:
        proc.kill()
        proc.wait()
        raise
    return proc


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
        until("the holder's record written", path.read_bytes, 10)
        with pytest.raises(LockHeld, match=rf"another bringup is already restarting this deployment: \S+ \(pid "
                                           rf"{holder.pid}\) restart other"):
            async with FileLock(str(path), "restart"):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert os.path.exists(path)
