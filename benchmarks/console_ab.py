"""Two checkouts of bringup side by side: each one's console and engine alone, on the same simulated server, in the
same windows. What a change to the console's cost did, measured without a GPU and without the noise of two runs
at two moments (a shared machine's load moves between runs more than a tenth of a percent of a core).

    python benchmarks/console_ab.py --base OTHER_CHECKOUT [--seconds 60] [--windows 3] [--gpus none|sim] [--name N]

`--base`: another checkout (`git worktree add /tmp/base REV`); this checkout is the candidate. The server is this
checkout's simulator (tp 1, metrics on, its log at the simulator's pace), started once as a `process` deployment;
both consoles watch it in 120x40 pseudo-terminals with their output drained, both engines follow it with nothing
drawn (`_engine_only.py`). `--gpus sim`: the simulator's nvidia-smi as the host's GPUs (one command streaming
samples, as on a host without NVML); `none` (default): no GPU telemetry, the rest of the console's work alone.
Each window samples every process's CPU time and RSS from /proc. Writes benchmarks/results/console_ab.json (or
NAME.json): the figures by window and their spread. The GPU host's comparison with nvitop is console_vs_nvitop.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Pty, cpu_seconds, rss_mib  # noqa: E402


def from_tree(tree: Path, argv: list[str]) -> list[str]:
    """bringup's command line run from `tree`'s code, whatever is installed: the tree first on sys.path."""
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from tui.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, *argv]


def window(procs: dict[str, int], seconds: float) -> dict[str, dict[str, float]]:
    c0 = {k: cpu_seconds(p) for k, p in procs.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    return {k: {"cpu_percent": round(100 * (cpu_seconds(p) - c0[k]) / dt, 3), "rss_mib": round(rss_mib(p), 1)}
            for k, p in procs.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, type=Path, help="the other checkout, compared with this one")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--gpus", choices=("none", "sim"), default="none")
    ap.add_argument("--name", default="console_ab")
    args = ap.parse_args()
    trees = {"base": args.base.resolve(), "candidate": ROOT}
    revs = {k: subprocess.run(["git", "-C", str(t), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() for k, t in trees.items()}
    with tempfile.TemporaryDirectory() as d, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        sim = [sys.executable, "-u", "-m", "tui.sim", "--model-path", "moonshotai/Kimi-K2.6", "--tp-size", "1",
               "--host", "127.0.0.1", "--port", str(port), "--enable-metrics", "--sim-load", "4",
               "--sim-state-dir", f"{d}/sim-gpus", "--time-scale", "0.2"]
        smi = [sys.executable, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", f"{d}/sim-gpus"]
        gpus = f"nvidia_smi = {json.dumps(smi)}" if args.gpus == "sim" else 'gpu_source = "none"'
        cfg = Path(d) / "config.toml"
        cfg.write_text(f"[hosts.sim]\n{gpus}\n\n[deployments.sim-on-gpu]\nmanager = \"process\"\npreset = \"sglang\"\n"
                       f"host = \"sim\"\nendpoint = \"http://127.0.0.1:{port}\"\ngpus = [0]\n"
                       f"command = {json.dumps(sim)}\n")
        env = {**os.environ, "HOME": d, "XDG_STATE_HOME": f"{d}/state", "XDG_CONFIG_HOME": f"{d}/cfg",
               "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        bringup = [sys.executable, "-m", "tui", "--config", str(cfg)]
        subprocess.run([*bringup, "start", "sim-on-gpu"], env=env, cwd=ROOT, check=True, timeout=120)
        procs: list[Pty] = []
        engines: list[subprocess.Popen[bytes]] = []
        try:
            subprocess.run([*bringup, "wait", "sim-on-gpu", "--timeout", "120"], env=env, cwd=ROOT, check=True,
                           timeout=180)
            watched: dict[str, int] = {}
            for k, tree in trees.items():
                console = Pty(from_tree(tree, ["--config", str(cfg), "console", "sim-on-gpu"]), env, cwd=d)
                procs.append(console)
                watched[f"{k} console"] = console.pid
                engine = subprocess.Popen([sys.executable, str(tree / "benchmarks" / "_engine_only.py"), "--config",
                                           str(cfg), "sim-on-gpu"], env=env, cwd=d)
                engines.append(engine)
                watched[f"{k} engine alone"] = engine.pid
            time.sleep(10)  # start-up is not the steady state
            windows = []
            for _ in range(args.windows):
                w = window(watched, args.seconds)
                windows.append(w)
                print(json.dumps(w), flush=True)
            out_bytes = {k: p.bytes for k, p in zip(("base", "candidate"), procs, strict=True)}
        finally:
            for p in procs:
                p.stop()
            for e in engines:
                e.kill()
                e.wait()
            subprocess.run([*bringup, "stop", "sim-on-gpu"], env=env, cwd=ROOT, timeout=60)
    spread = {k: [min(w[k]["cpu_percent"] for w in windows), max(w[k]["cpu_percent"] for w in windows)]
              for k in windows[0]}
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "revisions": revs, "gpus": args.gpus, "seconds": args.seconds, "windows": windows,
              "cpu_percent_min_max": spread, "terminal_bytes_whole_run": out_bytes}
    out = ROOT / "benchmarks" / "results" / f"{args.name}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
