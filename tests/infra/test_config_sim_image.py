"""deploy/sim-image.sh (the simulated server's image, for a newcomer to try container deployments) without a
container engine: its syntax and lint, and what it hands the engine, through stand-in `docker` and `podman`
commands that record the build: the context holds the simulator and nothing else, and runs on its own; the
Dockerfile is the one .ci/containers.sh builds; the deployment it prints is a valid config of that image."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.wait import slack
from tui.config.settings import load

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "sim-image.sh"

#: a stand-in engine: `info` answers (a daemon that runs), `build` keeps its arguments and its context
STUB = """#!/bin/bash
case $1 in
    info) exit 0 ;;
    build) printf '%s\\n' "$@" >"$STUB_OUT/args"; cp -r "${@: -1}" "$STUB_OUT/ctx"; echo sha256:0 ;;
    *) exit 3 ;;
esac
"""
#: what the script runs besides the engine (a PATH with these and no real docker or podman)
TOOLS = ("dirname", "mktemp", "mkdir", "cp", "find", "rm", "cat")


def _bin(tmp: Path, engines: tuple[str, ...]) -> Path:
    d = tmp / "bin"
    d.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (d / tool).symlink_to(found)
    for e in engines:
        (d / e).write_text(STUB)
        (d / e).chmod(0o755)
    return d


def run(tmp: Path, *args: str, engines: tuple[str, ...] = ("docker",), **env: str
        ) -> subprocess.CompletedProcess[str]:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    bindir = _bin(tmp, engines)
    return subprocess.run([shutil.which("bash") or "/bin/bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=slack(60), env={"PATH": str(bindir), "STUB_OUT": str(out), "HOME": str(tmp), **env})


def test_syntax() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck() -> None:
    res = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_the_image_is_the_simulator_on_a_python_base(tmp_path: Path, engine: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # docker is found by its daemon answering; podman is named (as the README says to)
    r = run(tmp_path, *([engine] if engine == "podman" else []), engines=(engine,))
    assert r.returncode == 0, r.stderr
    assert f"building bringup/sim:latest with {engine}" in r.stderr
    args = (tmp_path / "out" / "args").read_text().split("\n")
    assert args[:4] == ["build", "-q", "-t", "bringup/sim:latest"], args
    ctx = tmp_path / "out" / "ctx"
    assert (ctx / "Dockerfile").read_text() == (
        "FROM docker.io/library/python:3.11-slim\nCOPY tui /opt/bringup/tui\n"
        "ENV PYTHONPATH=/opt/bringup PYTHONUNBUFFERED=1\nCMD [\"python3\", \"-m\", \"tui.sim\"]\n")
    files = sorted(str(p.relative_to(ctx)) for p in ctx.rglob("*") if p.is_file())
    assert "tui/__init__.py" in files and "tui/sim/server.py" in files and "tui/sim/nvidia_smi.py" in files
    assert all(f == "Dockerfile" or f == "tui/__init__.py" or f.startswith("tui/sim/") for f in files), files
    assert not any("__pycache__" in f for f in files), files
    # the context is enough to run the simulator (the image's python3 has nothing else)
    probe = subprocess.run([sys.executable, "-c", "import tui.sim.server, tui.sim.nvidia_smi; "
                            "print(tui.sim.server.__file__)"], capture_output=True, text=True, timeout=slack(60),
                           env={"PYTHONPATH": str(ctx), "PATH": os.environ.get("PATH", "")}, cwd=tmp_path)
    assert probe.returncode == 0 and probe.stdout.startswith(str(ctx)), probe
    # the deployment printed: a valid config of that image, on this engine, the simulated nvidia-smi by its path
    cfg = tmp_path / "c.toml"
    cfg.write_text(r.stdout)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    s = load(str(cfg))
    d = s.deployments["sim-container"]
    assert (d.manager, d.engine, d.image, d.endpoint) == ("docker", engine, "bringup/sim:latest",
                                                          "http://127.0.0.1:31721")
    assert ("--init" in d.run_args) == (engine == "docker")  # podman refuses --init with --pid host
    assert d.run_args[:2] == ["--pid", "host"] and "/tmp/bringup-sim-container:/simgpu" in d.run_args
    assert Path(s.host(d.host).nvidia_smi[0]).is_absolute()


def test_image_base_and_port_can_be_chosen(tmp_path: Path) -> None:
    r = run(tmp_path, "docker", SIM_IMAGE="me/sim:1", SIM_BASE="localhost/py:3.12", SIM_PORT="32001")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "ctx" / "Dockerfile").read_text().startswith("FROM localhost/py:3.12\n")
    assert (tmp_path / "out" / "args").read_text().split("\n")[:4] == ["build", "-q", "-t", "me/sim:1"]
    assert 'image = "me/sim:1"' in r.stdout and 'endpoint = "http://127.0.0.1:32001"' in r.stdout


def test_without_an_engine_it_says_what_it_needs(tmp_path: Path) -> None:
    r = run(tmp_path, engines=())
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "sim-image: needs docker (its daemon running) or podman; neither answers here\n"
    r = subprocess.run(["bash", str(SCRIPT), "lxc"], capture_output=True, text=True, timeout=slack(60))
    assert r.returncode == 1 and "usage:" in r.stderr and "lxc" in r.stderr
