"""The fork server the end-to-end tests start most `bringup` commands from (tests/helpers/preloaded.py) gives what
a fresh `python -m tui` gives: the same exit status, stdout and stderr, read in the caller's working directory and
environment, and a command killed reads as killed. If it did not, the tests run through it would say nothing of the
real command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.preloaded import Preloaded
from tests.helpers.wait import slack


def both(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[tuple[int, bytes, bytes], tuple[int, bytes, bytes]]:
    real = subprocess.run([sys.executable, "-m", "tui", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=slack(60))
    forked = Preloaded.get().start(args, cwd=cwd, env=env)
    out, err = forked.communicate(60)
    assert forked.returncode is not None
    return (real.returncode, real.stdout, real.stderr), (forked.returncode, out, err)


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRINGUP_", "XDG_"))}
    return {**env, "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "cfg"), "XDG_STATE_HOME": str(tmp / "state"),
            **extra}


@pytest.mark.parametrize("args", [["--version"], ["status", "no-such-deployment"], ["flags", "--json", "demo"]],
                         ids=["version", "unknown deployment", "flags json"])
def test_a_forked_command_answers_as_a_fresh_one(tmp_path: Path, args: list[str]) -> None:
    real, forked = both(args, tmp_path, env_for(tmp_path))
    assert forked == real
    assert real[1] or real[2]  # it said something to compare


def test_a_forked_command_reads_the_callers_directory_and_environment(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[deployments.x\n")  # ./config.toml, broken: a one-line error
    real, forked = both(["status", "x"], tmp_path, env_for(tmp_path))
    assert forked == real and real[0] == 2 and b"config.toml" in real[2], real
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "broken.toml").write_text("deployments = 3\n")
    real, forked = both(["status", "x"], other, env_for(tmp_path, BRINGUP_CONFIG=str(other / "broken.toml")))
    assert forked == real and real[0] == 2 and b"broken.toml" in real[2], real


def test_a_forked_command_killed_reads_as_killed(tmp_path: Path) -> None:
    server = Preloaded.get()
    forked = server.start(["console", "--read-only"], cwd=tmp_path, env={**env_for(tmp_path), "TERM": "dumb"})
    os.kill(forked.pid, signal.SIGKILL)
    forked.communicate(30)
    assert forked.returncode == -signal.SIGKILL


def test_a_fork_server_whose_worker_is_gone_leaves_nothing_in_the_temporary_directory() -> None:
    server = Preloaded()  # one of its own: the worker's shared one stays up for the other tests
    directory = Path(server.socket).parent
    assert Path(server.socket).exists()
    assert server.proc.stdin is not None
    server.proc.stdin.close()  # what the worker's exit does
    assert server.proc.wait(timeout=slack(30)) == 0
    assert not directory.exists()
