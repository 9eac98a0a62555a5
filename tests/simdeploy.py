"""A simulated SGLang deployment for tests of the console: real processes, real HTTP on loopback."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e_helpers import free_port
from tui.config import Settings, load


def write_config(tmp: Path, *, scenario: str = "", time_scale: float = 0.1, extra: str = "") -> Path:
    port = free_port()
    py = sys.executable
    sim = ["-u", "-m", "tui.sim", "--port", str(port), "--tp-size", "8", "--enable-metrics", "--sim-load", "2",
           "--sim-state-dir", str(tmp / "simgpu"), "--time-scale", str(time_scale)]
    if scenario == "dflash-graph-crash":
        sim += ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"]
    if scenario:
        sim += ["--scenario", scenario]
    cmd = ", ".join(f'"{a}"' for a in [py, *sim])
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "config.toml"
    cfg.write_text(f"""
state_dir = "{tmp / 'state'}"
{extra}
[probe]
interval_s = 0.3
[hosts.simhost]
gpu_source = "nvidia-smi"
nvidia_smi = ["{py}", "-m", "tui.sim.nvidia_smi", "--sim-state-dir", "{tmp / 'simgpu'}"]
[deployments.sim]
host = "simhost"
manager = "process"
command = [{cmd}]
endpoint = "http://127.0.0.1:{port}"
gpus = [0, 1, 2, 3, 4, 5, 6, 7]
release_tolerance_mib = 512
stop_timeout_s = 20
hide_flags = ["--sim-", "--time-scale"]
""")
    return cfg


def settings_for(tmp: Path, **kw: object) -> Settings:
    return load(str(write_config(tmp, **kw)))  # type: ignore[arg-type]
