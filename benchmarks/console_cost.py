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
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tui.config import UIConfig

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed")
    with tempfile.TemporaryDirectory() as d:
        Path(d)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "HOME": d, "XDG_STATE_HOME": f"{d}/state", "XDG_CONFIG_HOME": f"{d}/cfg",
               "BRINGUP_DEMO_PORT": str(port), "TERM": "xterm-256color"}
        sock = f"{d}/tmux.sock"
        tmux = ["tmux", "-S", sock]
        subprocess.run([*tmux, "new-session", "-d", "-s", "b", "-x", "120", "-y", "36", "-c", d,
                        f"{sys.executable} -m tui demo --time-scale 0.3"], env=env, check=True)
        try:
            t0 = time.monotonic()
            while "READY" not in subprocess.run([*tmux, "capture-pane", "-p", "-t", "b"], capture_output=True,
                                                text=True).stdout:
                if time.monotonic() - t0 > 90:
                    sys.exit("demo did not get ready")
                time.sleep(0.5)
            time.sleep(5)
            pane = int(subprocess.run([*tmux, "display-message", "-p", "-t", "b", "#{pane_pid}"],
                                      capture_output=True, text=True).stdout)
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
            subprocess.run([*tmux, "send-keys", "-t", "b", "q"])
            time.sleep(5)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)


if __name__ == "__main__":
    main()
