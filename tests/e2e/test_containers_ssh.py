"""A `docker run` deployment on a host reached over SSH: the third test host (.ci/testhost.sh with TESTHOST_DIR,
booted by .ci/run with the Docker daemon's directory bound in and the static `docker` CLI copied to it), so every
`docker` command bringup runs goes through the SSH transport and the host's own CLI, as on a remote GPU box."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.wait import slack
from tui.config.deployments import DockerDeployment
from tui.config.parts import HostConfig
from tui.config.settings import ProbeConfig

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "testhost.sh"
IMAGE = os.environ.get("BRINGUP_DOCKER_IMAGE", "bringup/sim:test")
HOST_C = {"TESTHOST_DIR": str(ROOT / ".testhost-c")}


def th(*args: str, check: bool = True) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TESTHOST_")}, **HOST_C}
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=slack(60))
    if check and r.returncode != 0:
        raise AssertionError(f"testhost C {args}: {r.stderr}")
    return r.stdout


def _ready() -> bool:
    if not SCRIPT.exists() or not shutil.which("docker"):
        return False
    return th("status", check=False).startswith("up") and bool(th("exec", "docker", "version", check=False))


if not _ready():
    if os.environ.get("BRINGUP_DOCKER") == "required":
        raise RuntimeError("BRINGUP_DOCKER=required but the test host with docker (.testhost-c) is not up")
    pytest.skip("needs the third test host with the Docker daemon bound in (bash .ci/run boots it)",
                allow_module_level=True)


def test_a_docker_deployment_over_ssh_comes_up_and_a_flag_change_recreates_it(tmp_path: Path) -> None:
    ssh = tmp_path / "ssh_config"
    th("ssh-config", str(ssh))
    port, name = free_port(), f"bu-ssh-{uuid.uuid4().hex[:8]}"
    dep = DockerDeployment(host="far", manager="docker", container=name, image=IMAGE,
                           run_args=["--init", "-p", f"127.0.0.1:{port}:{port}"],
                           command=["python3", "-u", "-m", "tui.sim", "--host", "0.0.0.0", "--port", str(port),
                                    "--tp-size", "8", "--sim-state-dir", "/tmp/simgpu", "--time-scale", "0.1"],
                           endpoint=f"http://127.0.0.1:{port}", stop_timeout_s=20)
    cfg = ConfigFile(state_dir=tmp_path / "state", probe=ProbeConfig(interval_s=0.3),
                     hosts={"far": HostConfig(ssh="testhost", ssh_config=str(ssh), gpu_source="none")},
                     deployments={"far-docker": dep}).write(tmp_path / "config.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRINGUP_", "DOCKER_"))}  # nothing local

    def bringup(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *a], capture_output=True,
                              text=True, timeout=slack(120), env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)

    def inspect() -> dict[str, object]:
        return json.loads(th("exec", "docker", "container", "inspect", name))[0]  # type: ignore[no-any-return]

    try:
        r = bringup("start", "far-docker")
        assert r.returncode == 0, r.stdout + r.stderr
        st = json.loads(bringup("status", "far-docker", "--json").stdout)
        before = inspect()
        assert st["phase"] == "ready" and st["host"] == "far", st
        assert st["invocation"].startswith(str(before["Id"])[:12]), (st["invocation"], before["Id"])
        r = bringup("restart", "far-docker", "--set", "disable-cuda-graph", "--yes")
        assert r.returncode == 0, r.stdout + r.stderr
        after = inspect()
        assert after["Id"] != before["Id"]
        assert after["Config"]["Cmd"] == [*before["Config"]["Cmd"], "--disable-cuda-graph"]  # type: ignore[index]
        assert after["HostConfig"]["PortBindings"] == before["HostConfig"]["PortBindings"]  # type: ignore[index]
        assert json.loads(bringup("status", "far-docker", "--json").stdout)["phase"] == "ready"
    finally:
        th("exec", "docker", "rm", "-f", name, check=False)
