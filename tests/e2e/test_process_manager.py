"""How a `process` deployment is named to the operator (header, confirmation dialogs)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tui.lifecycle.flags import describe_command
from tui.managers.process import ProcessManager
from tui.transport.local import LocalTransport


def test_a_process_deployment_is_named_by_its_program_and_python_module() -> None:
    assert describe_command(["/usr/bin/python3", "-u", "-m", "sglang.launch_server", "--tp", "8"]) == \
        "python3 -m sglang.launch_server"
    assert describe_command(["/opt/venv/bin/vllm", "serve", "m"]) == "vllm"
    assert describe_command(["python3", "-m"]) == "python3"
    assert describe_command([]) == "?"


async def test_a_server_that_exited_unasked_is_not_read_as_stopped_while_its_supervisor_writes_how(
        tmp_path: Path) -> None:
    """The moment between the server's exit and its supervisor's record of it: with no stop asked, the run is still
    the current one (its exit status decides failed or stopped), never a stop; with a stop asked, it is stopping."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "current.json").write_text(json.dumps({
            "invocation": "run1", "argv": ["server"], "started_at": time.time(), "supervisor_pid": supervisor.pid,
            "pid": dead.pid, "exited_at": None, "exit_status": None}))
        mgr = ProcessManager(LocalTransport(), str(tmp_path), ["server"], {})
        unit = await mgr.state()
        assert unit.running and unit.invocation == "run1", unit
        (tmp_path / "stop.json").write_text(json.dumps({"invocation": "run1"}))
        unit = await mgr.state()
        assert unit.active == "deactivating" and not unit.running, unit
    finally:
        supervisor.kill()
        supervisor.wait()


class CountingTransport(LocalTransport):
    """This machine's transport, counting the reads the manager asks of it (each one a thread's wake-up)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def read_file(self, path: str) -> bytes | None:
        self.calls.append("read_file")
        return await super().read_file(path)

    async def read_files(self, paths: Sequence[str]) -> list[bytes | None]:
        self.calls.append("read_files")
        return await super().read_files(paths)


async def test_a_running_server_is_read_in_one_go_and_a_new_process_is_never_judged_by_the_old_ones_stat(
        tmp_path: Path) -> None:
    """Once a reading knows the server's PID, the next reads the records and its /proc stat in one call. A record
    that names another process (a restart between two readings) is read again for that process, so a live new
    server is never reported lost for the old one's exit, nor a dead one alive for the old one's life."""
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    first, second, supervisor = procs

    def record(pid: int, inv: str) -> None:
        (tmp_path / "current.json").write_text(json.dumps({
            "invocation": inv, "argv": ["server"], "started_at": time.time(), "supervisor_pid": supervisor.pid,
            "pid": pid, "exited_at": None, "exit_status": None}))

    try:
        t = CountingTransport()
        mgr = ProcessManager(t, str(tmp_path), ["server"], {})
        record(first.pid, "run1")
        assert (await mgr.state()).main_pid == first.pid
        t.calls.clear()
        unit = await mgr.state()
        assert unit.active == "active" and unit.main_pid == first.pid and t.calls == ["read_files"], (unit, t.calls)
        (tmp_path / "stop.json").write_text(json.dumps({"invocation": "run1"}))
        assert (await mgr.state()).active == "deactivating"
        first.kill()
        first.wait()
        (tmp_path / "stop.json").unlink()
        record(second.pid, "run2")  # restarted: the stat read in one go is the old server's, gone
        unit = await mgr.state()
        assert (unit.active, unit.sub, unit.main_pid, unit.invocation) == ("active", "running", second.pid, "run2")
        t.calls.clear()
        assert (await mgr.state()).main_pid == second.pid and t.calls == ["read_files"], t.calls
        record(first.pid, "run3")  # a record naming a dead process, read after a live one's
        supervisor.kill()
        supervisor.wait()
        assert (await mgr.state()).active == "failed"
    finally:
        for p in procs:
            p.kill()
            p.wait()
