"""The local restart lock's file (tui/managers/file_lock.py): a link planted at its path is refused with nothing
written through it, and the file is 0600 even where an older bringup made it 0644. Its holders named, each a
process of its own: tests/e2e/test_file_lock.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.managers import PermanentManagerError
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
