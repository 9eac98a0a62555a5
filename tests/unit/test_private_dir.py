"""The supervisor's private directories (tui/managers/supervisor.py): a run's directory is 0700, and a directory
bringup did not make is left as it was. As root, the first existing parent of a new run directory used to be
tightened too: `/tmp` became 0700 without its sticky bit, and every other user of the host lost it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tui.managers.supervisor import private_dir, write_private


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_missing_parents_are_made_private_and_the_existing_parent_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp: everyone's, sticky
    run = shared / "bringup" / "deployments" / "run-1"
    private_dir(str(run))
    assert mode(shared) == 0o1777
    for d in (shared / "bringup", shared / "bringup" / "deployments", run):
        assert mode(d) == 0o700, d


def test_the_directory_asked_for_is_tightened_when_it_is_ours(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    os.chmod(run, 0o755)
    private_dir(str(run))
    assert mode(run) == 0o700
    assert mode(tmp_path) == stat.S_IMODE(tmp_path.stat().st_mode)  # its parent untouched


def test_a_record_written_into_a_shared_directory_leaves_that_directory_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    write_private(str(shared / "state" / "argv.json"), b"[]")
    assert mode(shared) == 0o1777 and mode(shared / "state") == 0o700
    assert mode(shared / "state" / "argv.json") == 0o600
