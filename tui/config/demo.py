"""The built-in demo's set-up: the simulated SGLang server as an ordinary `process` deployment on this machine.

`bringup demo` runs the console on it (tui/ops/demo.py brings it up); it lives here, below the config loader
(settings.py), which adds it to every configuration (a deployment named `demo` always exists, so that `bringup demo`
works with no config at all). Nothing in the engine knows it is simulated: it is built from the same models as a
configured deployment.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from tui.config.deployments import ProcessDeployment
from tui.config.parts import ConfigError, HostConfig
from tui.guard.numbers import real_or_none, whole

#: the built-in deployment's name
DEMO = "demo"
DEFAULT_DEMO_PORT = 30999
#: a scenario's name as the simulator spells them (`dflash-graph-crash`): anything else read back is not one
_WORD = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


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


def last_demo(state_dir: Path) -> tuple[str, float]:
    """The scenario and time scale the demo was last brought up with (`bringup demo --scenario X`), from the
    command its flags were last written over (the process manager's `argv.config.json`); ("", 1.0) when none is on
    record. Issue 51: `bringup restart demo` built the plain demo, so a record's way back from a scenario demo
    brought back another server, its scenario and its DFlash flags dropped as a config "edit"."""
    try:
        argv = json.loads((state_dir / "deployments" / DEMO / "argv.config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "", 1.0
    if not isinstance(argv, list) or "tui.sim" not in argv or not all(isinstance(a, str) for a in argv):
        return "", 1.0

    def value(flag: str) -> str:
        return argv[argv.index(flag) + 1] if flag in argv[:-1] else ""

    scenario = value("--scenario") if _WORD.fullmatch(value("--scenario")) else ""
    scale = real_or_none(value("--time-scale"), low=1e-3, high=1e3, text=True)
    return scenario, 1.0 if scale is None else scale


def demo_deployment(state_dir: Path, scenario: str | None = "", time_scale: float | None = 1.0,
                    port: int | None = None) -> tuple[HostConfig, ProcessDeployment]:
    """The built-in demo: the simulated SGLang server as a `process` deployment on this machine (on
    $BRINGUP_DEMO_PORT's port unless `port` is given). `scenario` None (any command but `bringup demo`): the demo
    as it was last brought up, its scenario and time scale (`last_demo`), so `bringup restart demo` restarts the
    demo that runs, not the plain one."""
    if scenario is None:
        scenario, time_scale = last_demo(state_dir)
    time_scale = 1.0 if time_scale is None else time_scale
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
