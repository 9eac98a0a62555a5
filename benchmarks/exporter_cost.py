"""CPU and memory of `bringup exporter` next to the console, both watching the same ready 8-GPU demo.

    python benchmarks/exporter_cost.py [--seconds 60] [--scrape-s 1]

Starts `bringup demo` in a detached tmux session (the console, which starts the simulated server), waits for READY,
then starts `bringup exporter demo` on a free loopback port and scrapes its /metrics every `--scrape-s` seconds (a
fast Prometheus). Over the window it samples both processes' CPU time (utime+stime from /proc) and RSS. Writes
benchmarks/results/exporter_cost.json. The simulated server's own CPU is the workload, not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Tmux, cpu_seconds, demo_env, rss_mib

from tests.helpers.ports import free_port


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--scrape-s", type=float, default=1.0)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed")
    with tempfile.TemporaryDirectory() as d:
        env = demo_env(d)
        t = Tmux(f"{d}/tmux.sock", env, d, f"{sys.executable} -m tui demo --time-scale 0.3", size=(120, 36))
        exporter = None
        try:
            if t.wait_for(lambda screen: "READY" in screen, 90) is None:
                sys.exit("demo did not get ready")
            port = free_port()
            url = f"http://127.0.0.1:{port}/metrics"
            exporter = subprocess.Popen([sys.executable, "-m", "tui", "exporter", "demo", "--listen",
                                         f"127.0.0.1:{port}"], env=env, cwd=d, stdout=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL, text=True)
            assert exporter.stdout is not None
            exporter.stdout.readline()
            deadline = time.monotonic() + 30
            while 'phase="ready"} 1.0' not in _get(url):
                if time.monotonic() > deadline:
                    sys.exit("the exporter did not see the demo ready")
                time.sleep(0.2)
            time.sleep(5)
            pane = t.pid()
            c0, e0, w0 = cpu_seconds(pane), cpu_seconds(exporter.pid), time.monotonic()
            rss_c, rss_e, scrapes, scrape_ms = [], [], 0, []
            while time.monotonic() - w0 < args.seconds:
                s = time.monotonic()
                body = _get(url)
                scrape_ms.append(1000 * (time.monotonic() - s))
                scrapes += 1 if body else 0
                rss_c.append(rss_mib(pane))
                rss_e.append(rss_mib(exporter.pid))
                time.sleep(max(0.0, args.scrape_s - (time.monotonic() - s)))
            c1, e1, w1 = cpu_seconds(pane), cpu_seconds(exporter.pid), time.monotonic()
            span = w1 - w0
            scrape_ms.sort()
            result = {
                "what": f"bringup exporter (scraped every {args.scrape_s:g} s) next to the console, both on a ready "
                        "demo (8 simulated GPUs, streaming logs, metrics)",
                "seconds": round(span, 1),
                "exporter_cpu_percent_of_one_core": round(100 * (e1 - e0) / span, 2),
                "exporter_rss_mib_max": round(max(rss_e), 1),
                "console_cpu_percent_of_one_core": round(100 * (c1 - c0) / span, 2),
                "console_rss_mib_max": round(max(rss_c), 1),
                "scrapes": scrapes,
                "scrape_ms_p50": round(scrape_ms[len(scrape_ms) // 2], 2),
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            }
            print(json.dumps(result, indent=2))
            out = Path(__file__).parent / "results" / "exporter_cost.json"
            out.write_text(json.dumps(result, indent=2) + "\n")
        finally:
            if exporter is not None:
                exporter.terminate()
                exporter.wait(timeout=20)
            t.keys("q")  # the console stops the demo server it started
            time.sleep(5)
            t.kill()


def _get(url: str) -> str:
    try:
        return httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return ""


if __name__ == "__main__":
    main()
