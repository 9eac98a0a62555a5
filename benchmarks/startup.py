"""Start-up: `bringup demo` to its first full frame (all four panels on screen), in a real terminal (tmux).

    python benchmarks/startup.py [--runs 6]

Each run starts `bringup demo` in a fresh detached tmux session (120x36) and polls the screen (`tmux capture-pane`,
every 10 ms) until the four panel titles are all drawn; then `q`. The first run is cold for this
process tree (the OS page cache may already hold the files); the later ones have warm imports (.pyc written, files
cached). The console draws before the simulated server is up: a frame does not wait for the deployment.
Writes OUT/startup.json (OUT defaults to benchmarks/results).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Tmux, demo_env

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", str(ROOT / "benchmarks" / "results")))

TITLES = ("Lifecycle", "GPUs", "Log:", "Throughput")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed")
    times: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        env = demo_env(d)
        t: Tmux | None = None
        for i in range(args.runs):
            t0 = time.monotonic()
            t = Tmux(f"{d}/tmux.sock", env, str(ROOT), f"{sys.executable} -m tui demo --keep", size=(120, 36),
                     session=f"s{i}")
            took = t.wait_for(lambda screen: all(title in screen for title in TITLES), 30)
            if took is None:
                sys.exit("no full frame in 30 s:\n" + t.screen())
            times.append(time.monotonic() - t0)
            t.keys("q")
            end = time.monotonic() + 10
            while time.monotonic() < end and t.alive():
                time.sleep(0.05)
            print(f"run {i}: {times[-1]:.3f} s", flush=True)
        subprocess.run([sys.executable, "-m", "tui", "stop", "demo"], env=env, cwd=ROOT, capture_output=True,
                       timeout=60)
        if t is not None:
            t.kill()
    warm = times[1:]
    result = {
        "what": "`bringup demo` launched in tmux 120x36 until all four panels are drawn",
        "cold_first_run_s": round(times[0], 3),
        "warm_runs_s": [round(t, 3) for t in warm],
        "warm_median_s": round(statistics.median(warm), 3) if warm else None,
        "warm_max_s": round(max(warm), 3) if warm else None,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    print(json.dumps(result, indent=2))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "startup.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
