"""Shared helpers for the lifecycle benchmarks: a `process` deployment of the simulated SGLang server in a tmp dir
(the pattern of tests/e2e_helpers.py::Bringup.write_config), the CLI as a subprocess, the supervisor's timestamped
logs, percentiles, and cleanup of every process whose command line names the tmp dir."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def portable(text: str) -> str:
    """Results name paths relative to the repository: they are read on other machines."""
    return text.replace(str(ROOT) + "/", "")
PY = sys.executable
READY_LINE = "The server is fired up and ready to roll!"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def toml_list(items: list[Any]) -> str:
    return "[" + ", ".join(json.dumps(str(x)) if isinstance(x, str | Path) else str(x) for x in items) + "]"


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "machine": platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version()}


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(xs: list[float]) -> dict[str, Any]:
    return {"n": len(xs), "p50": pct(xs, 0.5), "p95": pct(xs, 0.95), "max": max(xs) if xs else None,
            "min": min(xs) if xs else None, "mean": sum(xs) / len(xs) if xs else None}


class SimDeploy:
    """One `process` deployment named `sim` of tui.sim, with its own port, state dir and simulated GPUs."""

    def __init__(self, tmp: Path, *, scenario: str, time_scale: float, extra_flags: str = "",
                 sim_args: tuple[str, ...] = (), release_timeout_s: float = 60.0) -> None:
        self.tmp = tmp
        self.name = "sim"
        self.port = free_port()
        self.state_dir = tmp / "state"
        self.sim_state = tmp / "simgpu"
        self.config = tmp / "bringup.toml"
        self.scenario = scenario
        self.time_scale = time_scale
        tmp.mkdir(parents=True, exist_ok=True)
        for d in ("home", "xdg-config", "xdg-state", "xdg-cache", "xdg-runtime"):
            (tmp / d).mkdir(exist_ok=True)
        os.chmod(tmp / "xdg-runtime", 0o700)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("BRINGUP_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        env.update(HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "xdg-config"),
                   XDG_STATE_HOME=str(tmp / "xdg-state"), XDG_CACHE_HOME=str(tmp / "xdg-cache"),
                   XDG_RUNTIME_DIR=str(tmp / "xdg-runtime"), BRINGUP_SIM_STATE=str(self.sim_state),
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", PYTHONUNBUFFERED="1")
        self.env = env
        smi = [PY, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", str(self.sim_state)]
        self.config.write_text(
            f"state_dir = {json.dumps(str(self.state_dir))}\n\n"
            "[hosts.simhost]\n"
            'gpu_source = "nvidia-smi"\n'
            f"nvidia_smi = {toml_list(smi)}\n\n"
            f"[deployments.{self.name}]\n"
            'host = "simhost"\n'
            'manager = "process"\n'
            f"command = {toml_list(self.sim_command(*sim_args))}\n"
            f"endpoint = \"http://127.0.0.1:{self.port}\"\n"
            "gpus = [0, 1, 2, 3, 4, 5, 6, 7]\n"
            "release_tolerance_mib = 512\n"
            f"release_timeout_s = {release_timeout_s}\n"
            "stop_timeout_s = 20\n"
            f"{extra_flags}\n",
            encoding="utf-8")

    def sim_command(self, *extra: str, port: int | None = None) -> list[str]:
        cmd = [PY, "-u", "-m", "tui.sim", "--port", str(port or self.port), "--tp-size", "8", "--enable-metrics",
               "--sim-load", "2", "--sim-state-dir", str(self.sim_state), "--time-scale", f"{self.time_scale:g}"]
        if self.scenario:
            cmd += ["--scenario", self.scenario]
        return [*cmd, *extra]

    def settings(self) -> Any:
        from tui.config import load

        return load(str(self.config))

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "deployments" / self.name

    def current(self) -> dict[str, Any] | None:
        with contextlib.suppress(OSError, ValueError):
            rec = json.loads((self.run_dir / "current.json").read_text(encoding="utf-8"))
            return rec if isinstance(rec, dict) else None
        return None

    def log_lines(self, invocation: str) -> list[tuple[float, str]]:
        out: list[tuple[float, str]] = []
        path = self.run_dir / "logs" / f"{invocation}.log"
        with contextlib.suppress(OSError):
            for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
                ts, _, text = raw.partition(" ")
                with contextlib.suppress(ValueError):
                    out.append((float(ts), text))
        return out

    def log_time(self, invocation: str, needle: str) -> float | None:
        for t, text in self.log_lines(invocation):
            if needle in text:
                return t
        return None

    def cli(self, *args: str) -> list[str]:
        return [PY, "-m", "tui", args[0], "--config", str(self.config), *args[1:]]

    def run_cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.cli(*args), cwd=self.tmp, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)


def kill_leftovers(tag: str) -> list[int]:
    """SIGKILL every process (not us) whose command line contains `tag` (our tmp path); returns their pids."""
    killed = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if tag in cmd:
            with contextlib.suppress(OSError):
                os.kill(int(d), signal.SIGKILL)
                killed.append(int(d))
    if killed:
        time.sleep(0.2)
    return killed


def leftovers(tag: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            with contextlib.suppress(OSError):
                if tag.encode() in Path(f"/proc/{d}/cmdline").read_bytes():
                    out.append(int(d))
    return out


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
