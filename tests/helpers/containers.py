"""The container engines (docker, podman) the e2e tests drive and one container deployment of the simulated server
through the `bringup` CLI. The daemon and the image come from `.ci/containers.sh`; the fixtures `daemon` (each
engine that answers, holding the image) and `make_container` are tests/e2e/conftest.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import ALL_GPUS, sim_host
from tests.helpers.wait import slack
from tui.config.deployments import parse_deployment
from tui.config.settings import ProbeConfig
from tui.managers.docker import DockerManager
from tui.transport.local import LocalTransport

PY = sys.executable
IMAGE = os.environ.get("BRINGUP_DOCKER_IMAGE", "bringup/sim:test")
ENGINES = ("docker", "podman")


def need_engine(engine: str, what: str) -> None:
    """What the engine lacks here: a skip, or a failure where BRINGUP_DOCKER / BRINGUP_PODMAN=required (CI)."""
    var = f"BRINGUP_{engine.upper()}"
    if os.environ.get(var) == "required":
        pytest.fail(f"{what}, but {var}=required (.ci/run starts the engine: .ci/containers.sh)")
    pytest.skip(f"{what} (bash .ci/containers.sh install up image; eval \"$(bash .ci/containers.sh env)\"); "
                f"{var}=required makes this a failure")


def cli(engine: str, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The engine's CLI; `timeout` bounds it on an idle machine (stretched by `slack`)."""
    r = subprocess.run([engine, *args], capture_output=True, text=True, timeout=slack(timeout))
    if check and r.returncode != 0:
        raise AssertionError(f"{engine} {' '.join(args)}: {r.stderr}")
    return r


def not_for_podman(engine: str, why: str) -> None:
    if engine == "podman":
        pytest.skip(f"podman: {why}")


class Deployment:
    """One container deployment of the simulated server, through the `bringup` CLI."""

    def __init__(self, tmp: Path, name: str, engine: str) -> None:
        self.tmp, self.name, self.engine = tmp, name, engine
        self.container = f"bu-{name}-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.simgpu = tmp / "simgpu"
        self.simgpu.mkdir(parents=True, exist_ok=True)
        self.config = tmp / "config.toml"

    def sim(self, *extra: str) -> list[str]:
        return ["python3", "-u", "-m", "tui.sim", "--host", "0.0.0.0", "--port", str(self.port), "--tp-size", "8",
                "--enable-metrics", "--sim-state-dir", "/simgpu", "--time-scale", "0.1", *extra]

    def publish(self) -> list[str]:
        # podman refuses --init in the host's PID namespace; there the server is no PID 1 and needs none
        init = [] if self.engine == "podman" else ["--init"]
        return ["--pid", "host", *init, "-p", f"127.0.0.1:{self.port}:{self.port}", "-v", f"{self.simgpu}:/simgpu"]

    def write(self, **dep: Any) -> None:
        d = parse_deployment(dict(host="simhost", endpoint=f"http://127.0.0.1:{self.port}", gpus=ALL_GPUS,
                                   release_tolerance_mib=512, stop_timeout_s=20, engine=self.engine, **dep))
        ConfigFile(state_dir=self.tmp / "state", probe=ProbeConfig(interval_s=0.3),
                   hosts={"simhost": sim_host(self.simgpu)}, deployments={self.name: d}).write(self.config)

    def docker_run(self, *sim_args: str, run_args: tuple[str, ...] = ()) -> None:
        self.write(manager="docker", container=self.container, image=IMAGE, run_args=[*self.publish(), *run_args],
                   command=self.sim(*sim_args))

    def bringup(self, *args: str, timeout: float = 90, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
        """`bringup --config ... ARGS`; `timeout` bounds it on an idle machine (stretched by `slack`)."""
        return subprocess.run([PY, "-m", "tui", "--config", str(self.config), *args], capture_output=True,
                              text=True, timeout=slack(timeout), cwd=self.tmp, env={**os.environ, **(env or {})})

    def status(self) -> dict[str, Any]:
        r = self.bringup("status", self.name, "--json")
        return json.loads(r.stdout.splitlines()[-1])

    def cli(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return cli(self.engine, *args, check=check, timeout=timeout)

    def inspect(self, name: str = "") -> dict[str, Any]:
        return json.loads(self.cli("container", "inspect", name or self.container).stdout)[0]

    def manager(self, transport: LocalTransport | None = None) -> DockerManager:
        return DockerManager(transport or LocalTransport(), self.container, str(self.tmp / "state"),
                             engine=self.engine)


#: the `make_container` fixture: a new deployment of the given name
MakeContainer = Callable[[str], Deployment]
