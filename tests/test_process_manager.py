"""How a `process` deployment is named to the operator (header, confirmation dialogs)."""

from __future__ import annotations

from tui.managers.process import describe_command


def test_a_process_deployment_is_named_by_its_program_and_python_module() -> None:
    assert describe_command(["/usr/bin/python3", "-u", "-m", "sglang.launch_server", "--tp", "8"]) == \
        "python3 -m sglang.launch_server"
    assert describe_command(["/opt/venv/bin/vllm", "serve", "m"]) == "vllm"
    assert describe_command(["python3", "-m"]) == "python3"
    assert describe_command([]) == "?"
