"""The console's cost with many deployments next to one, in the same run, on this machine.

    python benchmarks/fleet_cost.py [--n 8] [--seconds 30]

Starts N simulated SGLang servers as `process` deployments on this machine (real processes, real HTTP on loopback,
streaming logs and /metrics): each on its own port and its own simulated GPUs (`--sim-state-dir` of its own, so no
two share GPU memory), `--sim-load 0` and `--time-scale 0.1` to keep the servers cheap. All N are started and waited
for with `bringup wait` (exit 0 only when all are ready). Then, in a 120x40 pseudo-terminal whose output is drained
(benchmarks/_terminal.py), the console (a) watching one deployment (`bringup console sim-0`: one engine) and
(b) the fleet overview of all N (`bringup` with no name: an engine per deployment), one after the other, each
sampled over a window of `--seconds` after a warm-up: CPU % of one core (utime+stime from /proc) and RSS; and the
difference per extra deployment. The host's one GPU stream (the simulated `nvidia-smi`) reads sim-0's GPUs.
All local: connections are not counted (no SSH). Every server is stopped at the end.
Writes benchmarks/results/fleet_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Pty, cpu_seconds, rss_mib  # noqa: E402

from tests.helpers.simdeploy import ConfigFile, free_port, process_deployment, sim_command, sim_host  # noqa: E402
from tui.config.settings import ProbeConfig, UIConfig  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "fleet_cost.json"


def write_config(d: Path, n: int) -> tuple[Path, list[str]]:
    deps = {}
    for i in range(n):
        port = free_port()
        deps[f"sim-{i}"] = process_deployment(sim_command(port, d / f"sim-{i}", time_scale=0.1, sim_load=0), port,
                                              stop_timeout_s=20, hide_flags=["--sim-", "--time-scale"])
    cfg = ConfigFile(state_dir=d / "state", probe=ProbeConfig.model_validate({}), hosts={"simhost": sim_host(d / "sim-0")},
                     deployments=deps).write(d / "config.toml")
    return cfg, list(deps)


def start_all(run: Callable[..., subprocess.CompletedProcess[str]], names: list[str], timeout: float) -> float:
    """Start every deployment without waiting, then one `bringup wait` for all: seconds until all were ready."""
    t0 = time.monotonic()
    for name in names:
        r = run("start", name, "--no-wait")
        if r.returncode != 0:
            sys.exit(f"start {name}: {r.stdout}{r.stderr}")
    w = run("wait", *names, "--timeout", f"{timeout:g}", timeout=timeout + 60)
    if w.returncode != 0:
        sys.exit(f"not all ready (exit {w.returncode}): {w.stdout}{w.stderr}")
    return time.monotonic() - t0


def window(p: Pty, seconds: float) -> dict[str, float]:
    c0, b0, t0 = cpu_seconds(p.pid), p.bytes, time.monotonic()
    rss = []
    while time.monotonic() - t0 < seconds:
        rss.append(rss_mib(p.pid))
        time.sleep(1.0)
    wall = time.monotonic() - t0
    return {"cpu_percent_of_one_core": round(100 * (cpu_seconds(p.pid) - c0) / wall, 2),
            "rss_mib_max": round(max(rss), 1), "seconds": round(wall, 1),
            "terminal_output_kib": round((p.bytes - b0) / 1024, 1)}


def watch(argv: list[str], env: dict[str, str], cwd: str, needle: bytes, seconds: float, warmup: float) -> dict:
    p = Pty(argv, env, rows=40, cols=120, cwd=cwd)
    try:
        if p.wait_for(needle, 60) is None:
            raise SystemExit(f"{needle!r} never drawn by {' '.join(argv[3:])}")
        time.sleep(warmup)  # start-up is not the steady state
        return window(p, seconds)
    finally:
        p.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8, help="deployments (at least 2)")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=8)
    args = ap.parse_args()
    if args.n < 2:
        sys.exit("--n must be at least 2")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cfg, names = write_config(d, args.n)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
        env.update(HOME=tmp, XDG_STATE_HOME=f"{tmp}/xdg-state", XDG_CONFIG_HOME=f"{tmp}/cfg", TERM="xterm-256color",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        bringup = [sys.executable, "-m", "tui", "--config", str(cfg)]

        def run(*a: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*bringup, *a], env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)

        try:
            ready_s = start_all(run, names, 240)
            print(f"{args.n} deployments ready in {ready_s:.1f} s", flush=True)
            one = watch([*bringup, "console", names[0]], env, tmp, b"READY", args.seconds, args.warmup)
            print("one deployment:", json.dumps(one), flush=True)
            fleet = watch(bringup, env, tmp, f"Deployments ({args.n})".encode(), args.seconds, args.warmup)
            print(f"overview of {args.n}:", json.dumps(fleet), flush=True)
        finally:
            for name in names:
                run("stop", name, timeout=90)
        extra = args.n - 1
        result = {
            "what": (f"bringup's console in a 120x40 pseudo-terminal: (a) `console sim-0`, one deployment; (b) the "
                     f"fleet overview of {args.n} (no name); {args.n} simulated SGLang servers as local `process` "
                     "deployments, all ready, --sim-load 0, --time-scale 0.1, own port and simulated GPUs each; one "
                     "host, its one GPU stream (simulated nvidia-smi) reading sim-0's GPUs; no SSH"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "n": args.n,
            "refresh_hz": UIConfig.model_validate({}).refresh_hz,  # the default
            "all_ready_s": round(ready_s, 1),
            "one_deployment": one,
            "overview_all": fleet,
            "per_extra_deployment": {
                "cpu_percent_of_one_core": round((fleet["cpu_percent_of_one_core"]
                                                  - one["cpu_percent_of_one_core"]) / extra, 2),
                "rss_mib": round((fleet["rss_mib_max"] - one["rss_mib_max"]) / extra, 1),
            },
            "not_run": "the issue's target setup (16 deployments on 4 hosts over SSH, connections counted)",
        }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    p = result["per_extra_deployment"]
    print(f"\none deployment: {one['cpu_percent_of_one_core']} % of a core, RSS {one['rss_mib_max']} MiB; "
          f"overview of {args.n}: {fleet['cpu_percent_of_one_core']} %, RSS {fleet['rss_mib_max']} MiB; "
          f"per extra deployment: +{p['cpu_percent_of_one_core']} % of a core, +{p['rss_mib']} MiB")


if __name__ == "__main__":
    main()
