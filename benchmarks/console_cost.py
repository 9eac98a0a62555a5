"""CPU and memory of the console watching a ready 8-GPU demo, in a real terminal (tmux), at the default refresh.

    python benchmarks/console_cost.py [--seconds 60]

Starts `bringup demo` in a detached tmux session (120x36), waits for READY, then samples the console process's
CPU time (utime+stime from /proc) and RSS over the window. Writes benchmarks/results/console_cost.json.
The simulated server's own CPU is reported separately: it is the workload, not the console.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Tmux, cpu_seconds, demo_env, rss_mib

from tui.config.settings import UIConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed")
    with tempfile.TemporaryDirectory() as d:
        t = Tmux(f"{d}/tmux.sock", demo_env(d), d, f"{sys.executable} -m tui demo --time-scale 0.3", size=(120, 36))
        try:
            if t.wait_for(lambda screen: "READY" in screen, 90) is None:
                sys.exit("demo did not get ready")
            time.sleep(5)
            pane = t.pid()
            c0, w0 = cpu_seconds(pane), time.monotonic()
            rss = []
            while time.monotonic() - w0 < args.seconds:
                rss.append(rss_mib(pane))
                time.sleep(1)
            c1, w1 = cpu_seconds(pane), time.monotonic()
            result = {
                "what": "bringup console on a ready demo (8 simulated GPUs, streaming logs, metrics) in tmux",
                "seconds": round(w1 - w0, 1),
                "cpu_percent_of_one_core": round(100 * (c1 - c0) / (w1 - w0), 2),
                "rss_mib_max": round(max(rss), 1),
                "refresh_hz": UIConfig().refresh_hz,  # the default: the demo runs with no config
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            }
            print(json.dumps(result, indent=2))
            out = Path(__file__).parent / "results" / "console_cost.json"
            out.write_text(json.dumps(result, indent=2) + "\n")
            t.keys("q")
            time.sleep(5)
        finally:
            t.kill()


if __name__ == "__main__":
    main()
