"""How a `process` deployment is named to the operator (header, confirmation dialogs)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tui.managers.process import ProcessManager, describe_command
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
