"""The state directories bringup keeps its records in, made and checked through the guarded places only (issue 47,
review findings 1 and 2).

- The docker manager made its state dir with `mkdir -p -m 700` and then `chmod go-rwx` as commands, before anything
  checked the place: a link another user planted at the deployment's name in a shared (1777) state dir sent that
  chmod, as root, to whatever the link named (/etc: everyone locked out of it). Now `guard/files.private_dir`
  refuses the link in one line, and the target keeps its mode.
- A host's own `state_dir` never went through `check_own_dir`: one that other users can write is now refused at the
  CLI's entry, naming its config key, as bringup's own state dir already was.
- The local transport's `write_file` created files 0644 (the compose override holds the server's command line):
  0600 now, unless the caller names another mode.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.wait import slack
from tui.config.parts import HostConfig
from tui.managers import PermanentManagerError
from tui.managers.docker import DockerManager
from tui.transport.local import LocalTransport

ROOT = Path(__file__).resolve().parents[2]


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_a_link_planted_at_dockers_state_dir_is_refused_and_its_target_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"  # a team's state dir, or a host's, that every user can write (sticky, as /tmp)
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "deployments").mkdir()
    (shared / "deployments").chmod(0o777)
    victim = tmp_path / "etc"  # stands for /etc: root's, 0755
    victim.mkdir()
    victim.chmod(0o755)
    (shared / "deployments" / "llm").symlink_to(victim)  # planted by the other user
    mgr = DockerManager(LocalTransport(), "llm", str(shared / "deployments" / "llm"))
    with pytest.raises(PermanentManagerError) as e:
        asyncio.run(mgr._write_json("argv.json", ["--api-key", "x"]))
    assert "\n" not in str(e.value) and "refusing" in str(e.value), e.value
    assert mode(victim) == 0o755 and os.listdir(victim) == []


def test_dockers_state_dir_is_made_private_and_its_records_0600(tmp_path: Path) -> None:
    state = tmp_path / "state" / "deployments" / "llm"
    mgr = DockerManager(LocalTransport(), "llm", str(state))
    asyncio.run(mgr._write_json("argv.json", ["--api-key", "x"]))
    assert mode(state) == 0o700 and mode(state / "argv.json") == 0o600


def test_the_local_transport_writes_0600_unless_told(tmp_path: Path) -> None:
    t = LocalTransport()
    asyncio.run(t.write_file(str(tmp_path / "override.yml"), b"command: [--api-key, x]\n"))
    assert mode(tmp_path / "override.yml") == 0o600
    asyncio.run(t.write_file(str(tmp_path / "shown.txt"), b"x", mode=0o644))
    assert mode(tmp_path / "shown.txt") == 0o644


def test_a_hosts_state_dir_others_can_write_is_refused_naming_it(tmp_path: Path) -> None:
    shared = tmp_path / "team"
    shared.mkdir()
    shared.chmod(0o777)
    cfg = ConfigFile(state_dir=tmp_path / "state", hosts={"box": HostConfig(state_dir=str(shared))}
                     ).write(tmp_path / "bringup.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")} | {"PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), "status", "--json"], capture_output=True,
                       text=True, timeout=slack(60), env=env, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().count("\n") == 0 and f"hosts.box.state_dir {shared}" in r.stderr, r.stderr
    assert "other users can write to it" in r.stderr
    assert os.listdir(shared) == []
