"""Start-up: `bringup demo` to its first full frame (all four panels on screen), in a real terminal (tmux).

    python benchmarks/startup.py [--runs 6]

Each run starts `bringup demo` in a fresh detached tmux session (120x36) and polls the screen (`tmux capture-pane`,
as fast as tmux answers) until the four panel titles are all drawn; then `q`. The first run is cold for this
process tree (the OS page cache may already hold the files); the later ones have warm imports (.pyc written, files
cached). The console draws before the simulated server is up: a frame does not wait for the deployment.
Writes benchmarks/results/startup.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TITLES = ("Lifecycle", "GPUs", "Log:", "Throughput")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed")
    times: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "HOME": d, "XDG_STATE_HOME": f"{d}/state", "XDG_CONFIG_HOME": f"{d}/cfg",
               "BRINGUP_DEMO_PORT": str(port), "TERM": "xterm-256color"}
        tmux = ["tmux", "-S", f"{d}/tmux.sock"]
        for i in range(args.runs):
            t0 = time.monotonic()
            subprocess.run([*tmux, "new-session", "-d", "-s", f"s{i}", "-x", "120", "-y", "36", "-c", d,
                            f"{sys.executable} -m tui demo --keep"], env=env, check=True)
            while True:
                screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", f"s{i}"], capture_output=True,
                                        text=True).stdout
                if all(t in screen for t in TITLES):
                    times.append(time.monotonic() - t0)
                    break
                if time.monotonic() - t0 > 30:
                    sys.exit("no full frame in 30 s:\n" + screen)
            subprocess.run([*tmux, "send-keys", "-t", f"s{i}", "q"])
            end = time.monotonic() + 10
            while time.monotonic() < end and subprocess.run([*tmux, "has-session", "-t", f"s{i}"],
                                                             capture_output=True).returncode == 0:
                time.sleep(0.05)
            print(f"run {i}: {times[-1]:.3f} s", flush=True)
        subprocess.run([sys.executable, "-m", "tui", "stop", "demo"], env=env, capture_output=True, timeout=60)
        subprocess.run([*tmux, "kill-server"], capture_output=True)
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
    (Path(__file__).parent / "results" / "startup.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
