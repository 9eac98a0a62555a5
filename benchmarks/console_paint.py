"""Where the console's terminal output goes: bytes written each second, and per widget the lines rendered and the
refreshes asked, over a window of the demo at READY (the simulated server streaming its log and /metrics).

    python benchmarks/console_paint.py [--seconds 30] [--quiet-log]

The console runs in a 120x40 pseudo-terminal (benchmarks/_terminal.py), wrapped by _paint_counter.py. `--quiet-log`
runs the demo server with its log silent (it serves, and logs nothing), the floor of the console's own work.
Writes benchmarks/results/console_paint.json (or console_paint_quiet.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Pty, cpu_seconds, demo_env, rss_mib  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--quiet-log", action="store_true")
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = demo_env(home)
        env["PAINT_OUT"] = f"{home}/paint.json"
        if args.quiet_log:
            env["BRINGUP_SIM_QUIET_LOG"] = "1"
        per_second: list[int] = []
        console = Pty([sys.executable, str(ROOT / "benchmarks" / "_paint_counter.py"), "demo"], env, cwd=str(ROOT))
        try:
            if console.wait_for(b"READY", args.ready_timeout) is None:
                raise SystemExit("the demo did not reach READY")
            os.kill(console.pid, signal.SIGUSR2)
            b0, c0, t0 = console.bytes, cpu_seconds(console.pid), time.monotonic()
            rss: list[float] = []
            last = b0
            while time.monotonic() - t0 < args.seconds:
                time.sleep(1.0)
                per_second.append(console.bytes - last)
                last = console.bytes
                rss.append(rss_mib(console.pid))
            wall = time.monotonic() - t0
            cpu = 100 * (cpu_seconds(console.pid) - c0) / wall
            total = console.bytes - b0
            console.keys(b"q")
            for _ in range(100):
                if not console.alive():
                    break
                time.sleep(0.1)
        finally:
            console.stop()
        paint = json.loads(Path(env["PAINT_OUT"]).read_text()) if Path(env["PAINT_OUT"]).exists() else {}
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "quiet_log": args.quiet_log, "seconds": round(wall, 1), "terminal_output_kib": round(total / 1024, 1),
              "bytes_per_second": per_second, "cpu_percent_of_one_core": round(cpu, 2),
              "rss_mib_max": round(max(rss), 1), "paint": paint}
    out = ROOT / "benchmarks" / "results" / ("console_paint_quiet.json" if args.quiet_log else "console_paint.json")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "paint"}, indent=1))
    for key in ("cells_rendered", "lines_rendered", "whole_refreshes", "region_refreshes", "layout_refreshes", "whole_refresh_callers"):
        print(key, json.dumps(paint.get(key, {}))[:600])
    for k, v in paint.get("bytes_by_refreshes", {}).items():
        print(f"{v['bytes']:>8} B {v['frames']:>4} frames  {k}")


if __name__ == "__main__":
    main()
