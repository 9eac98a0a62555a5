"""`bringup status --all` says what `bringup status NAME` says, in the same words and with the same exit code
(issue 28, item 9), and a status names the config file in use.

A row that cannot be read had `ManagerError: ...` / `PermanentError: ...` in its NOTE and the command exited 0, while
`status NAME` of the same deployment said the error's words and exited 1 (or 2). The deployments here are containers
of a stand-in `docker` (a script first on PATH) that says what a real one says when its daemon is down, or when the
container does not exist; nothing is started.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host
from tests.helpers.wait import slack
from tui.cli.report import render_status, snapshot_dict
from tui.config.deployments import DeploymentConfig, parse_deployment
from tui.config.settings import load
from tui.model import Phase, Snapshot

#: a stand-in for the docker CLI: the container's name says which error it gives
FAKE_DOCKER = """#!/bin/sh
for a in "$@"; do last="$a"; done
case "$last" in
  *nodaemon*) echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." \
    "Is the docker daemon running?" >&2; exit 1;;
  *gone*) echo "Error response from daemon: No such container: $last" >&2; exit 1;;
esac
echo "[]"
"""
#: a Python class name where a person reads words: `ManagerError: ...`, `PermanentError: ...`, `OSError: ...`
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Timeout)\b:")


def container(name: str) -> DeploymentConfig:
    return parse_deployment({"host": "local", "manager": "docker", "container": f"bringup-{name}",
                             "endpoint": f"http://127.0.0.1:{free_port()}"})


def config(tmp: Path, deps: dict[str, DeploymentConfig], name: str = "config.toml") -> Path:
    return ConfigFile(state_dir=tmp / "state", hosts={}, deployments=deps).write(tmp / name)


def bringup(tmp: Path, cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([sys.executable, "-m", "tui", *args[:1], "--config", str(cfg), *args[1:]],
                          capture_output=True, text=True, timeout=slack(120), env=env, cwd=tmp,
                          stdin=subprocess.DEVNULL)


def rows(r: subprocess.CompletedProcess[str]) -> dict[str, dict[str, object]]:
    return {d["deployment"]: d for d in json.loads(r.stdout)["deployments"]}


@pytest.mark.parametrize(("name", "code"), [("nodaemon", 1), ("gone", 2)])
def test_a_row_that_cannot_be_read_says_what_status_name_says_and_exits_as_it_does(tmp_path: Path, name: str,
                                                                                    code: int) -> None:
    cfg = config(tmp_path, {name: container(name)})
    one = bringup(tmp_path, cfg, "status", name)
    assert one.returncode == code, one.stderr
    said = one.stderr.strip()
    assert said.startswith("bringup: ") and not CLASS_NAME.search(said), said
    words = said.removeprefix("bringup: ")

    every = bringup(tmp_path, cfg, "status", "--all", "--json")
    assert every.returncode == code, every.stdout + every.stderr
    note = str(rows(every)[name]["note"])
    assert note == words, (note, words)
    text = bringup(tmp_path, cfg, "status", "--all")
    assert text.returncode == code, text.stdout + text.stderr
    assert words in text.stdout and not CLASS_NAME.search(text.stdout), text.stdout


def test_the_worst_row_decides_and_a_readable_stopped_row_is_no_error(tmp_path: Path) -> None:
    sim = sim_command(free_port(), tmp_path / "simgpu")
    stopped = process_deployment(sim, int(sim[sim.index("--port") + 1]))
    # a stopped deployment alone: 0, as `status sim` gives
    cfg = ConfigFile(state_dir=tmp_path / "state", hosts={"simhost": sim_host(tmp_path / "simgpu")},
                     deployments={"sim": stopped}).write(tmp_path / "one.toml")
    assert bringup(tmp_path, cfg, "status", "sim").returncode == 0
    r = bringup(tmp_path, cfg, "status", "--all", "--json")
    assert r.returncode == 0 and rows(r)["sim"]["phase"] == "stopped", r.stdout + r.stderr
    # with one that cannot be read (1) and one that never will be (2): the worst, 2
    cfg = ConfigFile(state_dir=tmp_path / "state", hosts={"simhost": sim_host(tmp_path / "simgpu")},
                     deployments={"sim": stopped, "nodaemon": container("nodaemon"),
                                  "gone": container("gone")}).write(tmp_path / "three.toml")
    r = bringup(tmp_path, cfg, "status", "--all", "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    got = rows(r)
    assert got["sim"]["note"] == "" and got["nodaemon"]["note"] and got["gone"]["note"], got
    assert not any(CLASS_NAME.search(str(d["note"])) for d in got.values()), got


def test_status_all_names_the_config_file_first(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"nodaemon": container("nodaemon")}, "etc-bringup.toml")
    text = bringup(tmp_path, cfg, "status", "--all")
    assert text.stdout.splitlines()[0] == f"config: {cfg.resolve()}", text.stdout
    assert text.stdout.splitlines()[1].startswith("DEPLOYMENT"), text.stdout
    j = bringup(tmp_path, cfg, "status", "--all", "--json")
    assert json.loads(j.stdout)["config"] == str(cfg.resolve()), j.stdout


def test_a_status_names_the_config_file_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`status NAME`'s picture (tui/cli/report.py), given the settings: the file as an absolute path, first."""
    cfg = config(tmp_path, {"nodaemon": container("nodaemon")})
    monkeypatch.chdir(tmp_path)
    settings = load("config.toml")  # a relative --config: the header says which file that is
    snap = Snapshot(deployment="nodaemon", host="local", phase=Phase.STOPPED, invocation="", timeline=(),
                    failure=None, stalled_for=None, unit=None, gpus=None, throughput=None)
    d = snapshot_dict(snap, {}, time.time(), settings)
    assert d["config"] == str(cfg.resolve())
    assert render_status(d).splitlines()[0] == f"config: {cfg.resolve()}"
    assert render_status(d).splitlines()[1].startswith("nodaemon on local: STOPPED")
    # without settings (a caller that has none), as before
    assert "config" not in snapshot_dict(snap, {}, time.time())
