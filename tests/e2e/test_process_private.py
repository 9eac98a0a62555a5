"""A `process` deployment's secrets and output are its operator's (issue 29.4, 29.5): the environment (an HF_TOKEN)
is in no process's command line, where any user of the host reads it through `ps`, and yet the server has it; the
run directory is 0700 and every file in it 0600, so another user can read neither the server's output nor its
flags. Real supervisor, real server processes, real files."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.wait import until_awaited
from tui.managers.process import ProcessManager
from tui.transport.local import LocalTransport


def cmdlines_with(needle: bytes) -> list[tuple[int, bytes]]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if needle in cmd:
                out.append((int(entry), cmd))
    return out


async def until_running(mgr: ProcessManager) -> int:
    async def pid() -> int | None:
        unit = await mgr.state()
        return unit.main_pid if unit.running and unit.main_pid > 0 else None

    return await until_awaited("the server to run", pid, 10)


async def test_the_environment_is_in_no_command_line_and_the_server_has_it(tmp_path: Path) -> None:
    secret = f"hf_{uuid.uuid4().hex}"
    server = [sys.executable, "-c", "import time; time.sleep(120)", str(tmp_path)]
    mgr = ProcessManager(LocalTransport(), str(tmp_path / "run"), server, {"HF_TOKEN": secret}, stop_timeout=5)
    await mgr.start(server)
    try:
        pid = await until_running(mgr)
        rec = (tmp_path / "run" / "current.json").read_text()
        supervisor = int(json.loads(rec)["supervisor_pid"])
        assert Path(f"/proc/{supervisor}/cmdline").exists()
        assert cmdlines_with(secret.encode()) == []  # supervisor, server, and anything else
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"HF_TOKEN={secret}".encode() in environ
        assert secret not in rec
    finally:
        await mgr.stop()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can enter (pytest's own tmp root is 0700, which would hide a leak)."""
    d = Path(tempfile.mkdtemp(prefix="bringup-private-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


async def test_the_run_directory_is_0700_its_files_0600_and_another_user_reads_none(open_dir: Path) -> None:
    run = open_dir / "state" / "deployments" / "d"
    run.mkdir(parents=True, mode=0o755)
    run.chmod(0o755)  # as an older bringup left it: tightened
    server = [sys.executable, "-c", "print('model weights at /secret/path', flush=True)"]
    mgr = ProcessManager(LocalTransport(), str(run), server, {})
    await mgr.write_argv(server)
    async with mgr.lock("test"):
        await mgr.start(server)
        async def ended() -> bool:
            return not (await mgr.state()).running

        await until_awaited("the server to end", ended, 10)
    unit = await mgr.state()
    log = run / "logs" / f"{unit.invocation}.log"
    assert "model weights" in log.read_text()
    assert mode(run) == 0o700 and mode(run / "logs") == 0o700
    files = [log, run / "current.json", run / "argv.json", run / "argv.previous.json", run / "restart.lock"]
    assert {p.name: oct(mode(p)) for p in files} == {p.name: "0o600" for p in files}
    assert sorted(p.name for p in run.iterdir() if p.is_file() and mode(p) != 0o600) == []
    runuser = shutil.which("runuser")
    if runuser is None or os.geteuid() != 0:
        pytest.skip("no runuser, or not root: the second user's read is not tried")
    for p in (log, run / "current.json"):
        r = subprocess.run([runuser, "-u", "nobody", "--", "cat", str(p)], capture_output=True, text=True)
        assert r.returncode != 0 and "Permission denied" in r.stderr, (p, r)
    # and a file of ours made readable still is not: the directory keeps it
    (run / "argv.json").chmod(0o644)
    r = subprocess.run([runuser, "-u", "nobody", "--", "cat", str(run / "argv.json")], capture_output=True)
    assert r.returncode != 0
