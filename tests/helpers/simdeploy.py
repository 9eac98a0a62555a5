"""The simulated SGLang deployments of the tests and benchmarks, built from bringup's config model: one place that
says how the simulated server is started and watched, whether as a `process` deployment on this machine (real
processes, real HTTP on loopback) or as the `sglang-sim.service` unit of the systemd test host."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tui.config.deployments import DeploymentConfig, ProcessDeployment, SystemdDeployment, parse_deployment
from tui.config.parts import FlagConfig, HostConfig
from tui.config.settings import ProbeConfig, Settings, load

__all__ = [
    "HIDDEN",
    "ConfigFile",
    "FlagConfig",
    "config_with_another",
    "free_port",
    "hosts_on_testhost",
    "process_deployment",
    "settings_for",
    "sim_command",
    "sim_host",
    "sim_port_on_testhost",
    "systemd_deployment",
    "two_on_one_box",
    "write_config",
]

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
ALL_GPUS = list(range(8))
#: the systemd test host's unit running the simulated server (.ci/testhost.sh install-sim)
UNIT = "sglang-sim.service"


def sim_command(port: int, sim_state: Path, *, time_scale: float = 0.1, sim_load: int = 2) -> list[str]:
    """The simulated server of 8 GPUs with metrics, before any scenario or extra flag."""
    return [PY, "-u", "-m", "tui.sim", "--port", str(port), "--tp-size", "8", "--enable-metrics",
            "--sim-load", str(sim_load), "--sim-state-dir", str(sim_state), "--time-scale", f"{time_scale:g}"]


def sim_host(sim_state: Path) -> HostConfig:
    """This machine, with the simulated `nvidia-smi` reading the simulated GPUs in `sim_state`."""
    return HostConfig(gpu_source="nvidia-smi",
                      nvidia_smi=[PY, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", str(sim_state)])


def process_deployment(command: Sequence[str], port: int, **settings: Any) -> DeploymentConfig:
    """A `process` deployment of the simulated server on host `simhost` (see sim_host); `settings` are the other
    DeploymentConfig keys the test sets."""
    return ProcessDeployment(host="simhost", manager="process", command=list(command),
                             endpoint=f"http://127.0.0.1:{port}", gpus=ALL_GPUS, release_tolerance_mib=512,
                             **settings)


def hosts_on_testhost(ssh_config: Path, *, tester: bool = False) -> dict[str, HostConfig]:
    """The test host over SSH as root (`testhost`) and, with `tester`, as the unprivileged user with sudo
    (`tester`) and without it (`tester-nosudo`)."""
    hosts = {"testhost": HostConfig(ssh="testhost", ssh_config=str(ssh_config))}
    if tester:
        hosts["tester"] = HostConfig(ssh="testhost-tester", ssh_config=str(ssh_config), sudo=True)
        hosts["tester-nosudo"] = HostConfig(ssh="testhost-tester", ssh_config=str(ssh_config))
    return hosts


def sim_port_on_testhost() -> int:
    """The port of the test host's simulated server, as the running host says (`TESTHOST_SIM_PORT` at its `up`)."""
    out = subprocess.run(["bash", str(ROOT / ".ci" / "testhost.sh"), "status"], capture_output=True, text=True,
                         cwd=ROOT).stdout
    m = re.search(r"sim=\S+:(\d+)", out)
    return int(m[1]) if m else 30001


def systemd_deployment(port: int, host: str = "testhost", **settings: Any) -> DeploymentConfig:
    """The simulated server as the test host's systemd unit, listening on `port` (the host shares our network)."""
    return SystemdDeployment(host=host, manager="systemd", unit=UNIT, endpoint=f"http://127.0.0.1:{port}",
                             **settings)


def write_config(tmp: Path, *, scenario: str = "", time_scale: float = 0.1, sim_args: Sequence[str] = ()) -> Path:
    """The console tests' deployment `sim`: a fast probe, the simulator's own flags hidden from the flags panel;
    `sim_args`, more of the simulator's own options (`--sim-crash-after-requests 1`)."""
    port = free_port()
    sim = sim_command(port, tmp / "simgpu", time_scale=time_scale)
    if scenario == "dflash-graph-crash":
        sim += ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"]
    if scenario:
        sim += ["--scenario", scenario]
    sim += list(sim_args)
    dep = process_deployment(sim, port, stop_timeout_s=20, hide_flags=["--sim-", "--time-scale"])
    config = ConfigFile(state_dir=tmp / "state", probe=ProbeConfig(interval_s=0.3),
                        hosts={"simhost": sim_host(tmp / "simgpu")}, deployments={"sim": dep})
    return config.write(tmp / "config.toml")


def settings_for(tmp: Path, **kw: Any) -> Settings:
    return load(str(write_config(tmp, **kw)))


def two_on_one_box(tmp: Path) -> Path:
    """Two simulated servers sharing one 8-GPU box (GPUs 0-3 and 4-7, TP 4 each), and one on a host that is down."""
    deps = {}
    for name, gpus in (("sim-a", [0, 1, 2, 3]), ("sim-b", [4, 5, 6, 7])):
        port = free_port()
        cmd = sim_command(port, tmp / "simgpu")
        cmd[cmd.index("--tp-size") + 1] = "4"
        deps[name] = process_deployment([*cmd, "--sim-gpu-ids", ",".join(map(str, gpus))], port,
                                        stop_timeout_s=20).model_copy(update={"gpus": gpus})
    ssh_config = tmp / "ssh_config"
    ssh_config.write_text(f"Host downhost\n    HostName 127.0.0.1\n    Port {free_port()}\n    User nobody\n")
    deps["far"] = parse_deployment({"host": "down", "manager": "systemd", "unit": "sglang.service",
                                    "endpoint": f"http://127.0.0.1:{free_port()}"})
    hosts = {"simhost": sim_host(tmp / "simgpu"), "down": HostConfig(ssh="downhost", ssh_config=str(ssh_config))}
    return ConfigFile(state_dir=tmp / "state", probe=ProbeConfig.model_validate({"interval_s": 0.3}), hosts=hosts,
                      deployments=deps).write(tmp / "config.toml")


#: the second deployment of `config_with_another`
HIDDEN = "zz-hidden-dep"


def config_with_another(tmp_path: Path) -> Path:
    """The simulated deployment `sim` (never started: the console only watches it) and HIDDEN, a second one."""
    path = write_config(tmp_path)
    text = path.read_text()
    block = re.search(r"(?ms)^\[deployments\.sim\]\n.*?(?=^\[(?!deployments\.sim[.\]])|\Z)", text)
    assert block, text
    other = block[0].replace("[deployments.sim", f'[deployments."{HIDDEN}"')
    path.write_text(text + "\n" + other)
    return path
