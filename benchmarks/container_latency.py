"""Failure detection latency and restart dead time of a container deployment (docker or podman), on the simulated
server in the image .ci/containers.sh builds.

    eval "$(bash .ci/containers.sh env)"
    .venv/bin/python benchmarks/container_latency.py [--engine docker|podman] [--runs 10] [--time-scale 0.1]

The same measures as the process and systemd rows, so the figures sit next to them:
(a) failure detection: `--scenario crash-while-serving` (crashes ~10 s x time-scale after ready); an Engine
    (the console's) follows the ready deployment, and latency = the moment it says `failed` minus the
    container engine's own stamp (`logs --timestamps`) of the sim's fatal line. Both clocks are this host's.
(b) restart dead time: `bringup restart --set disable-cuda-graph|--unset ... --yes --json` (a recreate of the
    container each time), from the arrival times of its step lines: dead time = `start running` - `release done`
    (as benchmarks/restart_dead_time.py), and the whole outage = `ready` minus `stop running`.
Writes benchmarks/results/container_latency_ENGINE.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _simbench import ROOT, free_port, machine, summary

from tests.helpers.config_toml import ConfigFile
from tests.helpers.simdeploy import ALL_GPUS, sim_host
from tui.config.deployments import DockerDeployment
from tui.config.settings import ProbeConfig, load
from tui.engine import Engine
from tui.managers.container_state import stamp_key
from tui.model import Phase

PY = sys.executable
FATAL = "Subprocess scheduler_3"
IMAGE = os.environ.get("BRINGUP_DOCKER_IMAGE", "bringup/sim:test")


class Deployment:
    def __init__(self, tmp: Path, engine: str, time_scale: float, scenario: str) -> None:
        self.tmp, self.engine = tmp, engine
        self.container = f"bu-bench-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        simgpu = tmp / "simgpu"
        simgpu.mkdir(parents=True, exist_ok=True)
        init = [] if engine == "podman" else ["--init"]  # podman: no --init in the host's PID namespace
        cmd = ["python3", "-u", "-m", "tui.sim", "--host", "0.0.0.0", "--port", str(self.port), "--tp-size", "8",
               "--enable-metrics", "--sim-state-dir", "/simgpu", "--time-scale", str(time_scale),
               *(["--scenario", scenario] if scenario else [])]
        d = DockerDeployment(host="simhost", endpoint=f"http://127.0.0.1:{self.port}", gpus=ALL_GPUS,
                             release_tolerance_mib=512, stop_timeout_s=20, engine=engine, manager="docker",
                             container=self.container, image=IMAGE, command=cmd,
                             run_args=["--pid", "host", *init, "-p", f"127.0.0.1:{self.port}:{self.port}",
                                       "-v", f"{simgpu}:/simgpu"])
        self.config = tmp / "config.toml"
        ConfigFile(state_dir=tmp / "state", probe=ProbeConfig(), hosts={"simhost": sim_host(simgpu)},
                   deployments={"sim": d}).write(self.config)

    def cli(self, *args: str) -> list[str]:
        return [PY, "-m", "tui", "--config", str(self.config), *args]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.cli(*args), capture_output=True, text=True, timeout=timeout, cwd=self.tmp)

    def timed_lines(self, *args: str, timeout: float = 120) -> list[tuple[float, dict[str, Any]]]:
        """The command's JSON lines with the moment each arrived."""
        p = subprocess.Popen(self.cli(*args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             cwd=self.tmp)
        out: list[tuple[float, dict[str, Any]]] = []
        assert p.stdout is not None
        for line in iter(p.stdout.readline, ""):
            t = time.time()
            line = line.strip()
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append((t, json.loads(line)))
        p.wait(timeout)
        return out

    def fatal_stamp(self) -> float | None:
        r = subprocess.run(["sh", "-c", 'exec "$@" 2>&1', "logs", self.engine, "logs", "--timestamps",
                            self.container], capture_output=True, text=True, timeout=60)
        for raw in r.stdout.splitlines():
            stamp, _, text = raw.partition(" ")
            key = stamp_key(stamp)
            if key is not None and FATAL in text:
                return key / 1e9
        return None

    def remove(self) -> None:
        subprocess.run([self.engine, "rm", "-f", self.container], capture_output=True, timeout=60)


async def _failed_at(config: Path, timeout: float = 60.0) -> float | None:
    """When an engine following the ready deployment (as the console does) says `failed`: `bringup wait` would
    have returned at ready, before the crash."""
    settings = load(str(config))
    engine = Engine(settings, "sim", settings.deployments["sim"])
    await engine.start()
    try:
        t0 = time.monotonic()
        while engine.state.phase != Phase.FAILED and time.monotonic() - t0 < timeout:
            await engine.wait_changed(0.05)
        return time.time() if engine.state.phase == Phase.FAILED else None
    finally:
        await engine.close()


def failure_runs(engine: str, runs: int, ts: float) -> list[dict[str, Any]]:
    out = []
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="bu-cbench-") as tmp:
            d = Deployment(Path(tmp), engine, ts, "crash-while-serving")
            try:
                r = d.run("start", "sim")
                if r.returncode != 0:
                    out.append({"i": i, "error": r.stdout[-500:]})
                    continue
                began = time.time()
                failed = asyncio.run(_failed_at(d.config))
                fatal = d.fatal_stamp()
                # an engine that was not yet following when the line came would measure its own start-up
                out.append({"i": i, "latency_s": failed - fatal if failed and fatal else None,
                            "engine_started_before_fatal_s": fatal - began if fatal else None})
            finally:
                d.remove()
        print(f"failure {i}: {out[-1]}", file=sys.stderr)
    return out


def restart_runs(engine: str, runs: int, ts: float) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory(prefix="bu-cbench-") as tmp:
        d = Deployment(Path(tmp), engine, ts, "")
        try:
            r = d.run("start", "sim")
            assert r.returncode == 0, r.stdout
            for i in range(runs):
                change = ["--set", "disable-cuda-graph"] if i % 2 == 0 else ["--unset", "disable-cuda-graph"]
                lines = d.timed_lines("restart", "sim", *change, "--yes", "--json")
                steps = [(t, o) for t, o in lines if "step" in o]

                def at(step: str, status: str, steps: list[tuple[float, dict[str, Any]]] = steps) -> float | None:
                    return next((t for t, o in steps if o["step"] == step and o["status"] == status), None)

                rel, start, stop = at("release", "done"), at("start", "running"), at("stop", "running")
                ready = next((t for t, o in lines if o.get("phase") == "ready" or o.get("result") == "ready"), None)
                rec = {"i": i, "dead_time_s": start - rel if start and rel else None,
                       "outage_s": ready - stop if ready and stop else None}
                out.append(rec)
                print(f"restart {i}: {rec}", file=sys.stderr)
        finally:
            d.remove()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=("docker", "podman"), default="docker")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--time-scale", type=float, default=0.1)
    # the crash comes 10 s x this after ready: long enough for `bringup wait` to be up and following before it
    ap.add_argument("--failure-time-scale", type=float, default=0.3)
    a = ap.parse_args()
    fail = failure_runs(a.engine, a.runs, a.failure_time_scale)
    rest = restart_runs(a.engine, a.runs, a.time_scale)
    res = {"engine": a.engine, "machine": machine(), "time_scale": a.time_scale,
           "failure_time_scale": a.failure_time_scale,
           "failure_latency_s": summary([r["latency_s"] for r in fail if r.get("latency_s") is not None
                                         and (r.get("engine_started_before_fatal_s") or 0) > 1.0]),
           "restart_dead_time_s": summary([r["dead_time_s"] for r in rest if r.get("dead_time_s") is not None]),
           "restart_outage_s": summary([r["outage_s"] for r in rest if r.get("outage_s") is not None]),
           "failure_runs": fail, "restart_runs": rest}
    path = ROOT / "benchmarks" / "results" / f"container_latency_{a.engine}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if not k.endswith("_runs")}, indent=1))


if __name__ == "__main__":
    main()
