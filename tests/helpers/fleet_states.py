"""A fixed fleet for the overview's tests and snapshots: five deployments on three hosts, one in each state the
overview draws differently (ready and serving, failed, stalled in loading, another bringup at work, host down), at a
fixed clock."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tui.config.deployments import parse_deployment
from tui.config.parts import HostConfig
from tui.config.settings import Settings, load
from tui.model import Phase
from widgets.fleet_rows import FleetRow

NOW = 1_000_000.0

ROWS = [
    FleetRow("sim-a", "gpu-a", Phase.READY, since=NOW - 600, mem_used_mib=600_000, mem_total_mib=1_150_000,
             util_pct=87.0, tokens_per_s=2400.0),
    FleetRow("sim-b", "gpu-a", Phase.FAILED, since=NOW - 30, failure="cuda-graph"),
    FleetRow("sim-c", "gpu-b", Phase.LOADING, since=NOW - 95, stalled=True,
             note="STALLED 1m11s: no log line or GPU memory change"),
    FleetRow("sim-d", "gpu-b", Phase.GRAPH_CAPTURE, since=NOW - 20,
             note="another bringup is at work: restart by alice@laptop (pid 4242)"),
    FleetRow("sim-e", "gpu-c", Phase.UNKNOWN, note="reconnecting (attempt 2): gpu-c: SSH connection refused",
             host_down="reconnecting (attempt 2): gpu-c: SSH connection refused"),
]


def settings(tmp: Path) -> Settings:
    hosts = {h: HostConfig(gpu_source="none") for h in ("gpu-a", "gpu-b", "gpu-c")}
    command = [sys.executable, "-c", "pass"]
    deps = {r.name: parse_deployment({"host": r.host, "manager": "process", "command": command,
                                      "endpoint": f"http://127.0.0.1:{free_port()}"})
            for r in ROWS}
    return load(str(ConfigFile(state_dir=tmp / "state", hosts=hosts, deployments=deps).write(tmp / "config.toml")))
