"""A log burst: the server writes 20,000 lines/s for 10 s. How far behind is what the console shows, how much
memory does it take, do keys still answer? Side by side with `tail -F` of the same log in the same kind of
terminal.

    python benchmarks/log_burst.py [--runs 3]

Runs `bringup demo --scenario log-burst` in a detached tmux (200x50) and switches the log panel to all lines;
`tail -F` of the run's log file runs in a second tmux server of the same size. The simulated server numbers every
burst line and stamps it with the time it was written (`burst-seq: N at EPOCH`). Every ~100 ms the benchmark reads
both screens (`tmux capture-pane`), takes the newest burst line on each and computes its lag: now minus the time
that line was written. Every second it presses `/` in the console and times until the filter box asks for text,
then Esc until it is gone (key to screen, through the terminal; the log keeps streaming meanwhile). The console's
RSS is sampled throughout and its CPU over the burst. Each run is a fresh demo; figures are pooled over the runs,
each run's own are kept too. Writes benchmarks/results/log_burst.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Tmux, cpu_seconds, demo_env, rss_mib

SEQ = re.compile(r"burst-seq: (\d+) at (\d+\.\d+)")
FILTER_BOX = "Enter to apply"  # the filter box's prompt while it is being typed in


def newest(screen: str) -> tuple[int, float] | None:
    found = [(int(m[1]), float(m[2])) for m in SEQ.finditer(screen)]
    return max(found) if found else None


def pct(xs: list[float], q: float) -> float:
    return round(sorted(xs)[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else float("nan")


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        env = demo_env(d)
        cmd = f"{sys.executable} -m tui demo --scenario log-burst --time-scale 0.2"
        console = Tmux(f"{d}/a.sock", env, d, cmd, size=(200, 50))
        tail: Tmux | None = None
        try:
            if console.wait_for(lambda s: "READY" in s, 120) is None:
                sys.exit("the demo did not get ready:\n" + console.screen())
            console.keys("e")  # all lines, not only errors: every burst line is drawn
            cur = next(Path(d, "state").rglob("current.json"))
            log = json.loads(cur.read_text())["log"]
            tail = Tmux(f"{d}/b.sock", env, d, f"tail -n 0 -F {log}", size=(200, 50))
            pid = console.pid()
            if console.wait_for(lambda s: newest(s) is not None, 60) is None:
                sys.exit("no burst line seen")
            t_burst = time.monotonic()
            c0 = cpu_seconds(pid)
            lags: dict[str, list[float]] = {"bringup": [], "tail -F": []}
            keys: list[float] = []
            rss: list[float] = []
            last_key = time.monotonic()
            final_seq = args.rate * args.seconds - 1
            caught_up: dict[str, float] = {}
            while time.monotonic() - t_burst < args.seconds + 15 and len(caught_up) < 2:
                now = time.time()
                for name, t in (("bringup", console), ("tail -F", tail)):
                    if name in caught_up:
                        continue
                    n = newest(t.screen())
                    if n is None:
                        continue
                    lag = time.time() - n[1] if time.monotonic() - t_burst < args.seconds else None
                    if lag is not None:
                        lags[name].append(lag)
                    if n[0] >= final_seq - args.rate * 0.01:  # the last 10 ms of lines
                        caught_up[name] = round(time.time() - n[1], 3)
                rss.append(rss_mib(pid))
                if time.monotonic() - last_key > 1.0 and time.monotonic() - t_burst < args.seconds:
                    last_key = time.monotonic()
                    console.keys("/")
                    on = console.wait_for(lambda s: FILTER_BOX in s, 5)
                    console.keys("Escape")
                    off = console.wait_for(lambda s: FILTER_BOX not in s, 5)
                    keys += [x if x is not None else 5.0 for x in (on, off)]
                time.sleep(max(0.0, 0.1 - (time.time() - now)))
            cpu = cpu_seconds(pid) - c0
            wall = time.monotonic() - t_burst
            result = {
                "raw": {"lags": lags, "keys": keys},
                "bringup": {
                    "lag_s_p50": pct(lags["bringup"], 0.5), "lag_s_p95": pct(lags["bringup"], 0.95),
                    "lag_s_max": pct(lags["bringup"], 1.0), "samples": len(lags["bringup"]),
                    "last_line_shown_after_s": caught_up.get("bringup"),
                    "rss_mib_max": round(max(rss), 1),
                    "cpu_percent_of_one_core": round(100 * cpu / wall, 1),
                    "key_to_screen_ms_p50": round(1000 * statistics.median(keys), 1) if keys else None,
                    "key_to_screen_ms_p95": round(1000 * pct(keys, 0.95), 1) if keys else None,
                    "key_to_screen_ms_max": round(1000 * max(keys), 1) if keys else None,
                    "key_presses": len(keys),
                },
                "tail -F": {
                    "lag_s_p50": pct(lags["tail -F"], 0.5), "lag_s_p95": pct(lags["tail -F"], 0.95),
                    "lag_s_max": pct(lags["tail -F"], 1.0), "samples": len(lags["tail -F"]),
                    "last_line_shown_after_s": caught_up.get("tail -F"),
                },
            }
            console.keys("q")
            time.sleep(3)
            return result
        finally:
            console.kill()
            if tail is not None:
                tail.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    args = argparse.Namespace(rate=20_000, seconds=10.0)  # the simulated server's log-burst defaults
    if shutil.which("tmux") is None:
        sys.exit("tmux is needed")
    runs = []
    for i in range(a.runs):
        r = run_once(args)
        runs.append(r)
        print(f"run {i}: {json.dumps(r['bringup'])}", flush=True)
    lags = [x for r in runs for x in r["raw"]["lags"]["bringup"]]
    tail_lags = [x for r in runs for x in r["raw"]["lags"]["tail -F"]]
    keys = [x for r in runs for x in r["raw"]["keys"]]
    result = {
        "what": f"{args.rate} lines/s for {args.seconds:g} s; console in tmux 200x50 showing all lines; "
                "lag = time on screen minus time written, of the newest line on screen; pooled over the runs",
        "runs": a.runs, "lines_per_run": args.rate * args.seconds,
        "bringup": {"lag_s_p50": pct(lags, 0.5), "lag_s_p95": pct(lags, 0.95), "lag_s_max": pct(lags, 1.0),
                    "last_line_shown_after_s_max": max((r["bringup"]["last_line_shown_after_s"] or 99) for r in runs),
                    "rss_mib_max": max(r["bringup"]["rss_mib_max"] for r in runs),
                    "cpu_percent_of_one_core": [r["bringup"]["cpu_percent_of_one_core"] for r in runs],
                    "key_to_screen_ms_p50": round(1000 * pct(keys, 0.5), 1),
                    "key_to_screen_ms_p95": round(1000 * pct(keys, 0.95), 1),
                    "key_to_screen_ms_max": round(1000 * pct(keys, 1.0), 1), "key_presses": len(keys)},
        "tail -F": {"lag_s_p50": pct(tail_lags, 0.5), "lag_s_p95": pct(tail_lags, 0.95),
                    "lag_s_max": pct(tail_lags, 1.0)},
        "per_run": [{k: v for k, v in r.items() if k != "raw"} for r in runs],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    print(json.dumps({k: v for k, v in result.items() if k != "per_run"}, indent=2))
    (Path(__file__).parent / "results" / "log_burst.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
