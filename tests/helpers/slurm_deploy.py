"""A Slurm deployment of the simulated server on the test cluster (tests/helpers/slurm_cluster.py), as the e2e
tests of the Slurm manager, its console and its fronts write it: a config file with the cluster's login host (as
`tester`), the deployment, and bringup's CLI run on it as an operator would (a process of its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.ports import free_port
from tests.helpers.slurm_cluster import GPUS_PER_NODE, SlurmCluster

#: where each node's simulated GPUs keep their holders (the node's own /tmp: each node its own GPUs); the sim and
#: the simulated nvidia-smi are told the same directory
SIM_GPUS = "/tmp/bringup-slurm-e2e-gpus"


@dataclass
class Deployment:
    """One Slurm deployment of a test: its config file, its name, and its job's output on the shared filesystem."""

    config: Path
    name: str
    output: Path  # this side's path of OUTPUT_DIR/NAME

    def bringup(self, *args: str, timeout: float = 240, user_state: Path | None = None
                ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
        cfg = self.config if user_state is None else user_state
        return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=self.config.parent, stdin=subprocess.DEVNULL)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
        return subprocess.Popen([sys.executable, "-m", "tui", "--config", str(self.config), *args], text=True,
                                env=env, cwd=self.config.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)

    def status(self) -> dict[str, Any]:
        r = self.bringup("status", self.name, "--json", timeout=90)
        assert r.stdout.strip().startswith("{"), r.stdout + r.stderr
        return json.loads(r.stdout)

    def job_id(self, cluster: SlurmCluster) -> int:
        """The job bringup submitted last, from its record on the login host (as the operator's)."""
        raw = cluster.ctl("cat", f"/home/tester/.local/state/bringup/deployments/{self.name}/job.json",
                          user="tester")
        return int(json.loads(raw)["job"])


def toml_value(v: object) -> str:
    return json.dumps(v)


def deployment(tmp_path: Path, cluster: SlurmCluster, *, nodes: int = 1, extra: tuple[str, ...] = (),
               time_limit: str = "", name: str = "", state: str = "state") -> Deployment:
    """A config with the cluster's login host (as `tester`) and one Slurm deployment of the simulated server: a
    fresh port for its HTTP and its rendezvous, its output under a directory of its own on the shared
    filesystem."""
    name = name or f"k{uuid.uuid4().hex[:8]}"
    here, there = cluster.shared(f"bringup-e2e-{name}")
    port, dist = free_port(), free_port()
    command = ["python3", "-u", "/opt/bringup-sim/server.py", "--model-path", "moonshotai/Kimi-K2.6",
               "--tp-size", str(4 * nodes), "--host", "127.0.0.1", "--port", str(port), "--sim-state-dir", SIM_GPUS,
               "--time-scale", "0.05", "--enable-metrics", "--sim-release-delay", "0"]
    if nodes > 1:
        command += ["--nnodes", "{nnodes}", "--node-rank", "{node_rank}", "--dist-init-addr", f"{{head}}:{dist}"]
    command += list(extra)
    lines = [f"state_dir = {toml_value(str(tmp_path / state))}", "",
             "[hosts.cluster]", 'ssh = "slurm-tester"', f"ssh_config = {toml_value(str(cluster.ssh_config))}",
             f"nvidia_smi = {toml_value(['nvidia-smi', '--sim-state-dir', SIM_GPUS])}", "",
             f"[deployments.{name}]", 'manager = "slurm"', 'host = "cluster"', f'endpoint = "http://{{head}}:{port}"',
             'partition = "gpu"', f"node_count = {nodes}", f"gpus_per_node = {GPUS_PER_NODE}",
             f"output_dir = {toml_value(there)}", "ready_timeout_s = 180", "stop_timeout_s = 30",
             f"command = {toml_value(command)}"]
    if time_limit:
        lines.append(f"time = {toml_value(time_limit)}")
    cfg = tmp_path / f"{state}.toml"
    cfg.write_text("\n".join(lines) + "\n")
    return Deployment(cfg, name, here / name)
