"""A log burst: the server writes 20,000 lines/s for 10 s. How far behind is what the console shows, how much
memory does it take, do keys still answer? Side by side with `tail -F` of the same log in the same kind of
terminal.

    python benchmarks/log_burst.py [--runs 3] [--terminal tmux|pty]

Runs `bringup demo --scenario log-burst` in a terminal of 200x50 and switches the log panel to all lines; `tail -F`
of the run's log file runs in a second terminal of the same size. The terminal is a detached tmux (the screen as
a terminal draws it, read with `tmux capture-pane`), or with `--terminal pty` a bare pseudo-terminal whose output
is read as it is written (what the program draws, without a terminal emulator sharing the machine; the GPU host
has no tmux). The simulated server numbers every burst line and stamps it with the time it was written
(`burst-seq: N at EPOCH`). Every ~100 ms the benchmark takes the newest burst line on each screen and computes
its lag: now minus the time that line was written. Every second it presses `/` in the console and times until the
filter box asks for text, then closes it, alternately with Enter and with Esc, and times until it is gone (key to
screen, the log streaming meanwhile). Esc is reported apart: a lone ESC byte could begin an escape sequence, so
Textual, like vim and less, waits ESCDELAY (100 ms) for more bytes before taking it as the key, unless the
terminal speaks the kitty keyboard protocol. The console's RSS is sampled throughout and its CPU over the burst.
Each run is a fresh demo; figures are pooled over the runs, each run's own are kept too. Writes
OUT/log_burst.json (tmux) or OUT/log_burst_pty.json; OUT defaults to benchmarks/results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Pty, Tmux, cpu_seconds, demo_env, rss_mib

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", str(ROOT / "benchmarks" / "results")))
SEQ = re.compile(r"burst-seq: (\d+) at (\d+\.\d+)")
SEQ_B = re.compile(rb"burst-seq: (\d+) at (\d+\.\d+)")
FILTER_BOX = "Enter to apply"  # the filter box's prompt while it is being typed in
FILTER_IDLE = "e errors or all lines"  # ... and while it is not
KEYS = {"/": ("/", b"/"), "Enter": ("Enter", b"\r"), "Esc": ("Escape", b"\x1b")}  # tmux name, bytes


def newest(screen: str) -> tuple[int, float] | None:
    found = [(int(m[1]), float(m[2])) for m in SEQ.finditer(screen)]
    return max(found) if found else None


def pct(xs: list[float], q: float) -> float:
    return round(sorted(xs)[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else float("nan")


def key_figures(keys: list[float], esc: list[float]) -> dict[str, Any]:
    """Key to screen in ms: `/` and Enter, then Esc apart (it waits ESCDELAY by design)."""
    def ms(xs: list[float], q: float) -> float | None:
        return round(1000 * pct(xs, q), 1) if xs else None
    return {"key_to_screen_ms_p50": ms(keys, 0.5), "key_to_screen_ms_p95": ms(keys, 0.95),
            "key_to_screen_ms_max": ms(keys, 1.0), "key_presses": len(keys),
            "esc_to_screen_ms_p50": ms(esc, 0.5), "esc_to_screen_ms_max": ms(esc, 1.0), "esc_presses": len(esc)}


class TmuxView:
    """The console or tail -F in a detached tmux: the screen as tmux draws it."""

    def __init__(self, sock: str, env: dict[str, str], cwd: str, argv: list[str]) -> None:
        self.t = Tmux(sock, env, cwd, " ".join(argv), size=(200, 50))

    def newest(self) -> tuple[int, float] | None:
        return newest(self.t.screen())

    def wait_text(self, text: str, timeout: float) -> float | None:
        return self.t.wait_for(lambda s: text in s, timeout)

    def press(self, key: str, shown: str, timeout: float = 5.0) -> float | None:
        self.t.keys(KEYS[key][0])
        return self.t.wait_for(lambda s: shown in s, timeout)

    def keys(self, key: str) -> None:
        self.t.keys(key)

    def pid(self) -> int:
        return self.t.pid()

    def close(self) -> None:
        self.t.kill()


class PtyView:
    """... or in a bare pseudo-terminal: the newest burst line the program wrote, keys timed to its output."""

    def __init__(self, env: dict[str, str], cwd: str, argv: list[str]) -> None:
        self._newest: tuple[int, float] | None = None
        self.p = Pty(argv, env, rows=50, cols=200, cwd=cwd, on_output=self._seen)

    def _seen(self, data: bytes) -> None:
        # lines are drawn top to bottom: the last burst line in a chunk is the newest in it
        i = data.rfind(b"burst-seq: ")
        m = SEQ_B.match(data, i) if i >= 0 else None
        if m:
            n = (int(m[1]), float(m[2]))
            if self._newest is None or n > self._newest:
                self._newest = n

    def newest(self) -> tuple[int, float] | None:
        return self._newest

    def wait_text(self, text: str, timeout: float) -> float | None:
        return self.p.wait_for(text.encode(), timeout)

    def press(self, key: str, shown: str, timeout: float = 5.0) -> float | None:
        self.p.mark()
        self.p.keys(KEYS[key][1])
        return self.p.wait_for(shown.encode(), timeout)

    def keys(self, key: str) -> None:
        self.p.keys(key.encode())

    def pid(self) -> int:
        return self.p.pid

    def close(self) -> None:
        self.p.stop()


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        env = demo_env(d)
        argv = [sys.executable, "-m", "tui", "demo", "--scenario", "log-burst", "--time-scale", "0.2"]
        make: Callable[[str, list[str], str], TmuxView | PtyView]
        if args.terminal == "tmux":
            def make(name: str, argv: list[str], cwd: str) -> TmuxView | PtyView:
                return TmuxView(f"{d}/{name}.sock", env, cwd, argv)
        else:
            def make(name: str, argv: list[str], cwd: str) -> TmuxView | PtyView:
                return PtyView(env, cwd, argv)
        console = make("a", argv, str(ROOT))  # `-m tui` from the checkout, installed or not
        tail: TmuxView | PtyView | None = None
        try:
            if console.wait_text("READY", 120) is None:
                sys.exit("the demo did not get ready")
            console.keys("e")  # all lines, not only errors: every burst line is drawn
            cur = next(Path(d, "state").rglob("current.json"))
            log = json.loads(cur.read_text())["log"]
            tail = make("b", ["tail", "-n", "0", "-F", log], d)
            pid = console.pid()
            t_wait = time.monotonic()
            while console.newest() is None:
                if time.monotonic() - t_wait > 60:
                    sys.exit("no burst line seen")
                time.sleep(0.05)
            t_burst = time.monotonic()
            c0 = cpu_seconds(pid)
            lags: dict[str, list[float]] = {"bringup": [], "tail -F": []}
            keys: list[float] = []
            esc: list[float] = []
            rss: list[float] = []
            last_key = time.monotonic()
            cycle = 0
            final_seq = args.rate * args.seconds - 1
            caught_up: dict[str, float] = {}
            views = {"bringup": console, "tail -F": tail}
            while time.monotonic() - t_burst < args.seconds + 15 and len(caught_up) < 2:
                now = time.time()
                for name, v in views.items():
                    if name in caught_up:
                        continue
                    n = v.newest()
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
                    on = console.press("/", FILTER_BOX)
                    off = console.press("Enter" if cycle % 2 == 0 else "Esc", FILTER_IDLE)
                    keys.append(on if on is not None else 5.0)
                    (keys if cycle % 2 == 0 else esc).append(off if off is not None else 5.0)
                    cycle += 1
                time.sleep(max(0.0, 0.1 - (time.time() - now)))
            cpu = cpu_seconds(pid) - c0
            wall = time.monotonic() - t_burst

            result = {
                "raw": {"lags": lags, "keys": keys, "esc": esc},
                "bringup": {
                    "lag_s_p50": pct(lags["bringup"], 0.5), "lag_s_p95": pct(lags["bringup"], 0.95),
                    "lag_s_max": pct(lags["bringup"], 1.0), "samples": len(lags["bringup"]),
                    "last_line_shown_after_s": caught_up.get("bringup"),
                    "rss_mib_max": round(max(rss), 1),
                    "cpu_percent_of_one_core": round(100 * cpu / wall, 1),
                    **key_figures(keys, esc),
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
            console.close()
            if tail is not None:
                tail.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--terminal", choices=("tmux", "pty"), default="tmux",
                    help="a tmux screen (default), or a bare pseudo-terminal's output")
    a = ap.parse_args()
    args = argparse.Namespace(rate=20_000, seconds=10.0, terminal=a.terminal)  # the sim's log-burst defaults
    if a.terminal == "tmux" and shutil.which("tmux") is None:
        sys.exit("tmux is needed (or --terminal pty)")
    runs = []
    for i in range(a.runs):
        r = run_once(args)
        runs.append(r)
        print(f"run {i}: {json.dumps(r['bringup'])}", flush=True)
    lags = [x for r in runs for x in r["raw"]["lags"]["bringup"]]
    tail_lags = [x for r in runs for x in r["raw"]["lags"]["tail -F"]]
    keys = [x for r in runs for x in r["raw"]["keys"]]
    esc = [x for r in runs for x in r["raw"]["esc"]]
    where = "tmux 200x50 (the screen as tmux draws it)" if a.terminal == "tmux" else \
        "a 200x50 pseudo-terminal (its output as written)"
    result = {
        "what": f"{args.rate} lines/s for {args.seconds:g} s; console in {where}, showing all lines; "
                "lag = time on screen minus time written, of the newest line on screen; keys = `/` opening the "
                "filter box and Enter closing it; Esc apart (ESCDELAY); pooled over the runs",
        "terminal": a.terminal, "runs": a.runs, "lines_per_run": args.rate * args.seconds,
        "bringup": {"lag_s_p50": pct(lags, 0.5), "lag_s_p95": pct(lags, 0.95), "lag_s_max": pct(lags, 1.0),
                    "last_line_shown_after_s_max": max((r["bringup"]["last_line_shown_after_s"] or 99) for r in runs),
                    "rss_mib_max": max(r["bringup"]["rss_mib_max"] for r in runs),
                    "cpu_percent_of_one_core": [r["bringup"]["cpu_percent_of_one_core"] for r in runs],
                    **key_figures(keys, esc)},
        "tail -F": {"lag_s_p50": pct(tail_lags, 0.5), "lag_s_p95": pct(tail_lags, 0.95),
                    "lag_s_max": pct(tail_lags, 1.0)},
        "per_run": [{k: v for k, v in r.items() if k != "raw"} for r in runs],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    print(json.dumps({k: v for k, v in result.items() if k != "per_run"}, indent=2))
    OUT.mkdir(parents=True, exist_ok=True)
    name = "log_burst.json" if a.terminal == "tmux" else "log_burst_pty.json"
    (OUT / name).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
