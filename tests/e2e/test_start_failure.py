"""A `process` deployment whose command cannot be executed never had a process: its start fails with the reason,
in one line naming the command and the OS's error, and leaves no run that looks started (issue 28, item 3: a
restart printed `started: pid 0` and only then `cannot start '.venv/bin/python'`). The CLI's side, end to end, is
tests/e2e/test_release_evidence.py::test_a_command_that_cannot_be_run_fails_the_start_naming_it_never_started_pid_0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.managers import ManagerError, PermanentManagerError
from tui.managers.process import ProcessManager
from tui.transport.local import LocalTransport


@pytest.mark.parametrize("case", ["missing", "not-executable"])
async def test_a_command_that_cannot_be_executed_fails_the_start_naming_it(tmp_path: Path, case: str) -> None:
    prog = tmp_path / "bin" / "server"
    if case == "not-executable":
        prog.parent.mkdir()
        prog.write_text("#!/bin/sh\nexit 0\n")
        prog.chmod(0o644)
    run_dir = tmp_path / "run"
    mgr = ProcessManager(LocalTransport(), str(run_dir), [str(prog), "--port", "1"], {})
    with pytest.raises(PermanentManagerError) as e:
        await mgr.start(mgr.command)
    why = str(e.value)
    assert "\n" not in why
    errno = "No such file or directory" if case == "missing" else "Permission denied"
    assert why == f"cannot start {str(prog)!r}: {errno}", why
    rec = json.loads((run_dir / "current.json").read_text())
    assert rec["pid"] == 0 and rec["exit_status"] == 127 and rec["start_error"] == why, rec
    unit = await mgr.state()
    assert not unit.running and unit.main_pid == 0, unit
    # nothing is running, so a start with a command that works is not refused as "already running"
    with pytest.raises(ManagerError, match="cannot start"):
        await mgr.start(mgr.command)


async def test_a_relative_command_says_where_it_was_looked_for(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mgr = ProcessManager(LocalTransport(), str(tmp_path / "run"), [".venv/bin/python", "-m", "server"], {})
    with pytest.raises(PermanentManagerError) as e:
        await mgr.start(mgr.command)
    assert str(e.value) == f"cannot start '.venv/bin/python': No such file or directory (relative to {tmp_path})"
