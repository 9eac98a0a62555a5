"""The built-in demo's set-up: the simulated SGLang server as an ordinary `process` deployment on this machine.

`bringup demo` runs the console on it (tui/ops/demo.py brings it up); it lives here, below the config loader
(settings.py), which adds it to every configuration (a deployment named `demo` always exists, so that `bringup demo`
works with no config at all). Nothing in the engine knows it is simulated: it is built from the same models as a
configured deployment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tui.config.deployments import ProcessDeployment
from tui.config.parts import ConfigError, HostConfig
from tui.guard.numbers import whole

#: the built-in deployment's name
DEMO = "demo"
DEFAULT_DEMO_PORT = 30999


def demo_port() -> int:
    """The built-in demo's port: $BRINGUP_DEMO_PORT, else 30999. A value that is no port is a ConfigError naming the
    variable (one line, exit 2), raised by load(), never at import: `bringup --version` works whatever it says."""
    text = os.environ.get("BRINGUP_DEMO_PORT", "").strip()
    if not text:
        return DEFAULT_DEMO_PORT
    try:
        port = whole(text, "BRINGUP_DEMO_PORT", text=True)  # digits only (tui/guard/numbers.py)
    except ValueError:
        raise ConfigError(f"BRINGUP_DEMO_PORT (environment): {text!r} is not a port number (1-65535)") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"BRINGUP_DEMO_PORT (environment): {text} is out of range: a port is 1-65535")
    return port


def _demo_port_or_default() -> int:
    try:
        return demo_port()
    except ConfigError:  # said by load(), as one line, by every command that reads the config
        return DEFAULT_DEMO_PORT


#: the demo's port as help texts name it (read at import; load() checks the variable and uses demo_port())
DEMO_PORT = _demo_port_or_default()


def demo_deployment(state_dir: Path, scenario: str = "", time_scale: float = 1.0,
                    port: int | None = None) -> tuple[HostConfig, ProcessDeployment]:
    """The built-in demo: the simulated SGLang server as a `process` deployment on this machine (on
    $BRINGUP_DEMO_PORT's port unless `port` is given)."""
    port = demo_port() if port is None else port
    sim_state = str(state_dir / "demo" / "sim-gpus")
    cmd = [sys.executable, "-u", "-m", "tui.sim", "--model-path", "moonshotai/Kimi-K2.6", "--tp-size", "8",
           "--ep-size", "8", "--host", "127.0.0.1", "--port", str(port), "--enable-metrics", "--sim-load", "4",
           "--sim-state-dir", sim_state, "--time-scale", f"{time_scale:g}"]
    if scenario == "dflash-graph-crash":  # the K2.6 DFlash configuration, spelled out so the flags panel shows it
        cmd += ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "z-lab/Kimi-K2.6-DFlash",
                "--speculative-dflash-block-size", "8"]
    if scenario:
        cmd += ["--scenario", scenario]
    host = HostConfig(gpu_source="nvidia-smi",
                      nvidia_smi=[sys.executable, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", sim_state])
    dep = ProcessDeployment(host="demo-host", command=cmd, preset="sglang",
                            # the simulator's own, and the port the endpoint already names (which moves with
                            # $BRINGUP_DEMO_PORT: the ETA must not call a demo on another port another run)
                            hide_flags=["--sim-", "--time-scale", "--scenario", "--port"],
                            endpoint=f"http://127.0.0.1:{port}", gpus=list(range(8)),
                            release_timeout_s=120.0, release_tolerance_mib=512.0, stop_timeout_s=30.0,
                            # the simulated minute runs at the time scale, and so does the time it takes to stall
                            stall_after_s=max(1.0, 60.0 * time_scale) if time_scale != 1.0 else None)
    return host, dep
