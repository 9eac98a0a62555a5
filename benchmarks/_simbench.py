"""Shared helpers for the lifecycle benchmarks: a `process` deployment of the simulated SGLang server in a tmp dir
(built like the tests', by tests/helpers/simdeploy.py), the CLI as a subprocess, the supervisor's timestamped
logs, percentiles, and cleanup of every process whose command line names the tmp dir."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.config_toml import ConfigFile  # noqa: E402
from tests.helpers.ports import free_port  # noqa: E402
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host  # noqa: E402
from tui.config.parts import FlagConfig  # noqa: E402

__all__ = ["READY_LINE", "ROOT", "FlagConfig", "SimDeploy", "free_port", "kill_leftovers", "leftovers", "machine",
           "pid_alive", "portable", "summary"]


def portable(text: str) -> str:
    """Results name paths relative to the repository: they are read on other machines."""
    return text.replace(str(ROOT) + "/", "")
PY = sys.executable
READY_LINE = "The server is fired up and ready to roll!"


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

    def __init__(self, tmp: Path, *, scenario: str, time_scale: float, extra_flags: Sequence[FlagConfig] = (),
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
        dep = process_deployment(self.sim_command(*sim_args), self.port, release_timeout_s=release_timeout_s,
                                 stop_timeout_s=20, extra_flags=list(extra_flags))
        ConfigFile(state_dir=self.state_dir, hosts={"simhost": sim_host(self.sim_state)},
                   deployments={self.name: dep}).write(self.config)

    def sim_command(self, *extra: str, port: int | None = None) -> list[str]:
        cmd = sim_command(port or self.port, self.sim_state, time_scale=self.time_scale)
        if self.scenario:
            cmd += ["--scenario", self.scenario]
        return [*cmd, *extra]

    def settings(self) -> Any:
        from tui.config.settings import load

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
