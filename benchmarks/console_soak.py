"""The console's memory over time: the demo in a 120x40 pseudo-terminal for an hour, its RSS sampled every minute,
a restart (r, y) every third sample, the log's two views and the sweep key pressed between samples, and
tracemalloc's top allocation sites compared between the middle and the end: what grows, if anything does.

    python benchmarks/console_soak.py [--minutes 60] [--every 60] [--no-tracemalloc] [--restart-every N] [--no-keys]
                                      [--time-scale F] [--busy-log LINES_PER_S] [--name NAME]

`--restart-every 0` (no restarts) and `--no-keys` take the actions out one at a time, to say which one the growth
follows: the same soak with one cause less, side by side.

The target (issue: lighter than nvitop): RSS growth under 2 MiB over the second half. tracemalloc costs CPU and
a lot of memory of its own; `--no-tracemalloc` measures RSS without it. With tracemalloc, the two snapshots also
count the live objects by type (`types_grew_most_second_half`: a site that allocates is not always the one that
keeps); `SOAK_HOLDERS=module.Type,...` says what holds the instances of those types, and `SOAK_SIZES=module.Type,...`
the length of each container those instances hold (a bounded buffer still filling grows as a leak does);
`SOAK_FRAMES=25 SOAK_CALLERS=file.py:LINE,...` the whole stacks that made the live blocks of those sites (heavy: for
minutes, not the hour); `SOAK_INTERN=1` the new path components pathlib interned, by the code that parsed them. Writes
benchmarks/results/console_soak_tracemalloc.json (or console_soak.json without tracemalloc).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _terminal import Pty, cpu_seconds, demo_env, rss_mib  # noqa: E402


def growth(before: dict[str, object], after: dict[str, object], n: int = 15) -> list[dict[str, object]]:
    """The allocation sites that grew most between two snapshots (KiB and blocks)."""
    was = {t["where"]: t for t in before["top"]}  # type: ignore[index, union-attr]
    rows = []
    for t in after["top"]:  # type: ignore[union-attr]
        w = was.get(t["where"], {"kib": 0.0, "count": 0})
        rows.append({"where": t["where"], "kib": round(t["kib"] - w["kib"], 1), "count": t["count"] - w["count"]})
    return sorted(rows, key=lambda r: -float(r["kib"]))[:n]  # type: ignore[arg-type]


def finished_sweep(state_dir: Path, deployment: str = "demo") -> Path:
    """A finished sweep of the demo in its state dir, written through the runner's own recorder: so that the sweep
    key opens the real view (its matrix, charts and records read from disk) and Esc closes it, as in a day of work,
    instead of a notice that there is no sweep. Four configurations of twelve cells, one failed."""
    from tui.sweep.recorder import Recorder
    from tui.sweep.results import (
        CellMetrics,
        CellRecord,
        ConfigRecord,
        FailureInfo,
        Stat,
        SweepMeta,
        cell_id,
        default_results_dir,
    )

    now = time.time() - 3600
    configs = [f"speculative-num-draft-tokens={n}" for n in (4, 8, 16, 32)]
    cells = [(p, 256, c) for p in (1024, 8192) for c in (1, 2, 4, 8, 16, 32)]
    ids = [cell_id(p, o, c, 0) for p, o, c in cells]
    rec = Recorder(default_results_dir(state_dir, deployment, now))
    argv = ("python3", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.6", "--tp-size", "8")
    rec.write_meta(SweepMeta(deployment, "local", now, argv, tuple(configs), tuple(ids), "done", os.getpid(),
                             finished_at=now + 3000, keep="original"))
    at = now
    for k, name in enumerate(configs):
        at += 300
        failed = k == len(configs) - 1
        failure = FailureInfo("graph-capture", "cuda-graph", ("RuntimeError: CUDA error: out of memory",),
                              "lower --cuda-graph-max-bs") if failed else None
        rec.append(ConfigRecord(name, {"speculative-num-draft-tokens": name.split("=")[1]}, argv, f"run{k}",
                                "failed" if failed else "ready", 1, failure,
                                {} if failed else {str(g): 131072.0 for g in range(8)},
                                None if failed else 240.0 + 10 * k, at).to_json())
        if failed:
            continue
        for (p, o, c), cid in zip(cells, ids, strict=True):
            at += 40
            total = 90.0 * c ** 0.8 * (1 + 0.07 * k) * (1.0 if p == 1024 else 0.6)
            m = CellMetrics(completed=8 * c, duration_s=38.0, ttft_ms=Stat(210.0, 180.0, 420.0, 650.0),
                            tpot_ms=Stat(11.0, 10.5, 14.0, 19.0), tok_s_total=total, tok_s_user=total / c,
                            tok_s_gpu=total / 8, req_s=total / 256, accept_len=3.1 + 0.1 * k, accept_rate=0.6)
            rec.append(CellRecord(name, cid, p, o, c, 0, True, "", 1, f"run{k}", m, at).to_json())
    rec.close()
    return rec.dir


class BusyLog(threading.Thread):
    """Appends the demo server's own newest decode line, stamped now, `rate` times a second to the log of its
    current run (the process manager's file, opened O_APPEND by it and by us, whole lines per write), through
    restarts: a new run's file is followed from when it appears."""

    def __init__(self, home: Path, rate: float) -> None:
        super().__init__(daemon=True)
        self.logs = home
        self.rate = rate
        self.stop = threading.Event()
        self.written = 0

    def _files(self) -> set[Path]:
        return set(self.logs.glob("**/deployments/demo/logs/*.log"))

    def run(self) -> None:
        seen = self._files()
        current = max(seen, key=lambda f: f.stat().st_mtime)
        template = ""
        owed = 0.0
        while not self.stop.wait(1.0):
            new = self._files() - seen
            if new:
                seen |= new
                current = max(new, key=lambda f: f.stat().st_mtime)
            with current.open("rb") as f:  # its tail: a run's log grows to tens of MiB in an hour
                f.seek(max(0, f.seek(0, os.SEEK_END) - (64 << 10)))
                tail = f.read().decode(errors="replace").splitlines()
            decode = [ln for ln in tail if "Decode batch" in ln and " " in ln]
            template = decode[-1].split(" ", 1)[1] if decode else template
            owed += self.rate
            n, owed = int(owed), owed - int(owed)
            if template and n:
                data = "".join(f"{time.time():.6f} {template}\n" for _ in range(n)).encode()
                fd = os.open(current, os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, data)  # one write: never interleaved mid-line with the supervisor's
                finally:
                    os.close(fd)
                self.written += n


def server_log_lines(home: Path) -> int:
    """Lines in the demo's log files (every run's, and a rotated one's), as the process manager keeps them under the
    state dir."""
    n = 0
    for f in home.glob("**/deployments/demo/logs/*.log*"):
        with f.open("rb") as fh:
            n += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--no-tracemalloc", action="store_true")
    ap.add_argument("--restart-every", type=int, default=3, metavar="N",
                    help="a restart (r, y) every N samples; 0: none")
    ap.add_argument("--no-keys", action="store_true", help="no log views or sweep key between samples")
    ap.add_argument("--name", help="write benchmarks/results/NAME.json instead of the default name")
    ap.add_argument("--time-scale", type=float, default=0.3, help="the demo's (`bringup demo --time-scale`)")
    ap.add_argument("--busy-log", type=float, default=0.0, metavar="LINES_PER_S",
                    help="also append this many of the server's own decode lines a second to its log (a chatty "
                    "server: the demo writes 150-340 lines a minute, so the console's 10,000-line buffer would "
                    "still be filling in the second half; at 10 a second it is full in about 15 minutes)")
    args = ap.parse_args()
    samples = max(2, int(args.minutes * 60 / args.every))
    with tempfile.TemporaryDirectory() as home:
        env = {**demo_env(home), "SOAK_DIR": home}
        if not args.no_keys:
            finished_sweep(Path(env["XDG_STATE_HOME"]) / "bringup")
        scale = f"{args.time_scale:g}"
        argv = ([sys.executable, str(ROOT / "benchmarks" / "_soak_child.py"), "demo", "--time-scale", scale]
                if not args.no_tracemalloc else [sys.executable, "-m", "tui", "demo", "--time-scale", scale])
        console = Pty(argv, env, cwd=str(ROOT))
        rss: list[float] = []
        log_lines: list[int] = []  # the lines in the demo's log files so far (`--busy-log`'s too): the panel's input
        busy: BusyLog | None = None
        busy_alive = False
        restarts = {"asked": 0, "ready": 0}
        snapshots: dict[str, int] = {}
        quit_clean = False
        try:
            if console.wait_for(b"READY", 180) is None:
                raise SystemExit("the demo did not reach READY")
            c0, t0 = cpu_seconds(console.pid), time.monotonic()
            busy = BusyLog(Path(home), args.busy_log) if args.busy_log else None
            if busy is not None:
                busy.start()
            for k in range(samples):
                time.sleep(args.every)
                rss.append(rss_mib(console.pid))
                log_lines.append(server_log_lines(Path(home)))
                if not args.no_tracemalloc and k in (samples // 2 - 1, samples - 1):
                    os.kill(console.pid, signal.SIGUSR2)
                    snapshots["middle" if k < samples - 1 else "end"] = len(snapshots)
                # errors only, all lines again, the sweep view opened and closed
                views = () if args.no_keys else (b"e", b"e", b"S", b"\x1b")
                for keys in views:
                    console.keys(keys)
                    time.sleep(0.5)
                if args.restart_every and k % args.restart_every == args.restart_every - 1:
                    restarts["asked"] += 1
                    console.mark()
                    console.keys(b"r")
                    time.sleep(1.0)
                    console.keys(b"y")
                    if console.wait_for(b"READY", 120) is not None:
                        restarts["ready"] += 1
            cpu = 100 * (cpu_seconds(console.pid) - c0) / (time.monotonic() - t0)
            if busy is not None:
                busy_alive = busy.is_alive()  # False: it died, and the log was not as busy as asked
                busy.stop.set()
                busy.join()
            console.keys(b"q")
            quit_clean = False
            for _ in range(100):
                if not console.alive():
                    quit_clean = True
                    break
                time.sleep(0.1)
        finally:
            if not quit_clean:
                console.stop()
        snaps = {name: json.loads((Path(home) / f"snapshot-{i}.json").read_text())
                 for name, i in snapshots.items() if (Path(home) / f"snapshot-{i}.json").exists()}
    half = len(rss) // 2
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "minutes": args.minutes, "every_s": args.every, "tracemalloc": not args.no_tracemalloc,
              "time_scale": args.time_scale, "busy_log_lines_per_s": args.busy_log,
              "busy_log_written": busy.written if busy is not None else 0,
              "busy_log_alive_to_the_end": busy_alive if busy is not None else None, "server_log_lines": log_lines,
              "rss_mib": rss, "growth_first_half_mib": round(rss[half - 1] - rss[0], 1) if half else None,
              "growth_second_half_mib": round(rss[-1] - rss[half - 1], 1) if half else None,
              "restarts": restarts, "restart_every_samples": args.restart_every, "keys": not args.no_keys,
              "q_exited": quit_clean, "cpu_percent_of_one_core": round(cpu, 2)}
    if "middle" in snaps and "end" in snaps:
        result["traced_kib"] = {"middle": snaps["middle"]["traced_kib"], "end": snaps["end"]["traced_kib"]}
        result["grew_most_second_half"] = growth(snaps["middle"], snaps["end"])
        was = snaps["middle"].get("types", {})
        result["types_grew_most_second_half"] = sorted(
            ([k, n - was.get(k, 0)] for k, n in snaps["end"].get("types", {}).items() if n - was.get(k, 0) > 0),
            key=lambda kv: -kv[1])[:25]
        result["holders"] = {"middle": snaps["middle"].get("holders", {}), "end": snaps["end"].get("holders", {})}
        result["sizes"] = {"middle": snaps["middle"].get("sizes", {}), "end": snaps["end"].get("sizes", {})}
        result["callers"] = {"middle": snaps["middle"].get("callers", {}), "end": snaps["end"].get("callers", {})}
        result["interned"] = {"middle": snaps["middle"].get("interned", {}), "end": snaps["end"].get("interned", {})}
    out = ROOT / "benchmarks" / "results" / (f"{args.name}.json" if args.name else "console_soak.json"
                                             if args.no_tracemalloc else "console_soak_tracemalloc.json")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
