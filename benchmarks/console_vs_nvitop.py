"""The console's CPU and memory next to nvitop's, on a real GPU host, over the same windows.

    OUT=results python3 benchmarks/console_vs_nvitop.py [--seconds 60]

On a GPU host (needs torch for the load and nvitop for the comparison): starts the simulated SGLang server as a
`process` deployment on GPU 0 (streaming log lines and /metrics, real HTTP), waits for it with `bringup wait`, puts
a real load on the GPU (100 GiB held, matmuls running), then runs `bringup console` (GPUs through NVML, logs,
metrics, probes; default refresh) in one pseudo-terminal and nvitop's monitor in another, both 120x40 with their
output drained, and samples each process's CPU time and RSS from /proc over the same windows: nvitop at its
default 2 s interval, then at 1 s (bringup's default refresh), then at 0.5 s; then the console alone for one window, counting the access lines its probes and scrapes write into the
server's log; then a window with bringup at 2 Hz.
Two more processes run in the same windows, to say where bringup's share goes: the engine alone
(`_engine_only.py`: every collector the console runs, nothing drawn), and the Textual floor
(`_textual_floor_app.py`, in a third terminal: bringup's layout with two rows changing once a second and no work,
what Textual itself takes to keep such a screen live), and the NVML floor (Python reading the GPUs through
bringup's NVML collector once a second, nothing else: what any NVML monitor, nvitop included, carries in memory
before it draws anything), and bringup's imports alone (the console's modules loaded, nothing run). Each RSS is
also split into anonymous and file pages, with the thread count, and once by mapping (`rss_by_mapping_mib`).
Writes OUT/console_vs_nvitop.json.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", str(ROOT / "benchmarks" / "results")))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pyspy import short, working_samples  # noqa: E402
from _terminal import Pty, cpu_seconds, rss_by_mapping, rss_mib, rss_parts  # noqa: E402
from gpu_h200 import LOAD  # noqa: E402  (the same load: ALLOC_GIB, default 100 GiB, and matmuls)

#: Python and NVML, nothing else: bringup's NVML collector reading the GPUs once a second, as the console does
#: bringup's imports for the console and nothing run: what the modules themselves (ours, Textual, pydantic, httpx)
#: take before anything is sampled or drawn
IMPORTS_FLOOR = "import time, tui.cli, tui.console.run; time.sleep(600)"

NVML_FLOOR = """
import time
from tui.collectors.gpu_nvml import NvmlSource
src = NvmlSource()
while True:
    src.sample()
    time.sleep(1.0)
"""


def window(procs: dict[str, Pty | subprocess.Popen[bytes]], seconds: float) -> dict[str, dict[str, float]]:
    """CPU % of one core and RSS of each process over the same window, sampled once a second (and, for those in a
    terminal, what they wrote to it)."""
    c0 = {k: cpu_seconds(p.pid) for k, p in procs.items()}
    b0 = {k: getattr(p, "bytes", 0) for k, p in procs.items()}
    t0 = time.monotonic()
    rss: dict[str, list[float]] = {k: [] for k in procs}
    while time.monotonic() - t0 < seconds:
        for k, p in procs.items():
            rss[k].append(rss_mib(p.pid))
        time.sleep(1.0)
    wall = time.monotonic() - t0
    out: dict[str, dict[str, float]] = {}
    for k, p in procs.items():
        out[k] = {"cpu_percent_of_one_core": round(100 * (cpu_seconds(p.pid) - c0[k]) / wall, 2),
                  "rss_mib_max": round(max(rss[k]), 1), "seconds": round(wall, 1), **rss_parts(p.pid)}
        if isinstance(p, Pty):
            out[k]["terminal_output_kib"] = round((p.bytes - b0[k]) / 1024, 1)
    return out


def access_lines(lines: list[str], seconds: float) -> dict[str, float]:
    """The server's access lines per minute, by what asked: bringup's readiness probes (/health, /v1/models, a
    generation) and its /metrics scrapes. The simulated load runs inside the server and writes none."""
    per_min = 60.0 / seconds
    kinds = {"probes": ('"GET /health', '"GET /v1/models', '"POST /v1/completions', '"POST /generate'),
             "metrics_scrapes": ('"GET /metrics',)}
    return {k: round(sum(1 for ln in lines if any(w in ln for w in ws)) * per_min, 1) for k, ws in kinds.items()}


def profile(py_spy: str, pids: dict[str, int], seconds: float, top: int = 40) -> dict[str, object]:
    """py-spy samples of each process at 250 Hz over the same `seconds`: the functions that were on the stack of
    most working samples (a function counted once per sample however deep it recurs)."""
    spies = {}
    for name, pid in pids.items():
        raw = OUT / f"profile_{name.replace(' ', '_')}.txt"
        spies[name] = (raw, subprocess.Popen([py_spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "250",
                                              "-f", "raw", "-o", str(raw), "--nonblocking"],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    out: dict[str, object] = {}
    for name, (raw, spy) in spies.items():
        _, err = spy.communicate(timeout=seconds + 60)
        if not raw.exists():
            out[name] = {"error": err.decode(errors="replace")[-300:]}
            continue
        working, total = Counter[str](), 0
        for frames, n in working_samples(raw):
            total += n
            for f in {short(f) for f in frames}:
                working[f] += n
        out[name] = {"working_samples": total, "samples_per_second": 250,
                     "top": [[n, f] for f, n in working.most_common(top)]}
    return out


def _origin(module: str) -> str:
    spec = importlib.util.find_spec(module)
    return spec.origin if spec is not None and spec.origin else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--quiet-log", action="store_true",
                    help="the server logs nothing routine (--log-level warning): the floor of the console's own work; "
                         "one window, at nvitop's 1 s")
    ap.add_argument("--profile", metavar="PY_SPY",
                    help="after the windows, sample the console and the engine with this py-spy for --seconds: "
                         "where their CPU goes, by function (OUT/profile_*.txt, and the top functions in the JSON)")
    ap.add_argument("--console-env", action="append", default=[], metavar="KEY=VALUE",
                    help="a second console, with this in its environment, in the same windows (an A/B of a setting: "
                         "MALLOC_ARENA_MAX=2, ...); repeatable, all in the one console")
    ap.add_argument("--dry-run", action="store_true",
                    help="check the script on a machine without a GPU: no load, a sleeping placeholder for nvitop")
    args = ap.parse_args()
    nvitop_cmd = [sys.executable, "-m", "nvitop", "-m", "full", "--interval"]
    load_code, nvml_code = LOAD, NVML_FLOOR
    if args.dry_run:
        nvml_code = "import time; time.sleep(600)"
        nvitop_cmd = [sys.executable, "-c", "import sys, time; time.sleep(600)"]
        load_code = "print('ready', flush=True); import time; time.sleep(600)"
    OUT.mkdir(parents=True, exist_ok=True)
    result: dict[str, object] = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                                            f"{platform.python_version()}"}
    # as installed: pip compiles every module when it installs a package, and a module compiled at each start
    # costs memory that is not given back (pynvml, 8,000 lines: 13 MiB of RSS more than from its compiled file)
    compileall.compile_dir(ROOT / "tui", quiet=1)
    compileall.compile_dir(ROOT / "widgets", quiet=1)
    result["modules_compiled"] = {m: Path(importlib.util.cache_from_source(f)).exists() for m, f in (
        ("tui", str(ROOT / "tui" / "console" / "viewer.py")), ("textual", _origin("textual")), ("pynvml", _origin("pynvml")))
        if f}
    if not args.dry_run:
        result["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as d, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        cfg = Path(d) / "config.toml"
        sim = [sys.executable, "-u", "-m", "tui.sim", "--model-path", "moonshotai/Kimi-K2.6", "--tp-size", "1",
               "--host", "127.0.0.1", "--port", str(port), "--enable-metrics", "--sim-load", "4",
               "--sim-state-dir", f"{d}/sim-gpus", "--time-scale", "0.2"]
        if args.quiet_log:
            sim += ["--log-level", "warning"]
        # a dry run has no GPU: the simulator's nvidia-smi stands in, so that the start can see the release
        smi = [sys.executable, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", f"{d}/sim-gpus"]
        cfg.write_text(
            (f"[hosts.sim]\nnvidia_smi = {json.dumps(smi)}\n\n" if args.dry_run else "")
            + "[deployments.sim-on-gpu]\nmanager = \"process\"\npreset = \"sglang\"\n"
            + ("host = \"sim\"\n" if args.dry_run else "")
            + f"endpoint = \"http://127.0.0.1:{port}\"\ngpus = [0]\ncommand = {json.dumps(sim)}\n")
        env = {**os.environ, "HOME": d, "XDG_STATE_HOME": f"{d}/state", "XDG_CONFIG_HOME": f"{d}/cfg",
               "TERM": "xterm-256color", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        bringup = [sys.executable, "-m", "tui", "--config", str(cfg)]
        subprocess.run([*bringup, "start", "sim-on-gpu"], env=env, cwd=ROOT, check=True, timeout=120)
        subprocess.run([*bringup, "wait", "sim-on-gpu", "--timeout", "120"], env=env, cwd=ROOT, check=True,
                       timeout=180)
        load = subprocess.Popen([sys.executable, "-c", load_code], stdout=subprocess.PIPE, text=True)
        assert load.stdout is not None
        assert load.stdout.readline().strip() == "ready"
        procs: list[Pty] = []
        try:
            console = Pty([*bringup, "console", "sim-on-gpu"], env)
            procs.append(console)
            variant: dict[str, Pty] = {}
            if args.console_env:
                extra = dict(kv.split("=", 1) for kv in args.console_env)
                variant[f"bringup with {' '.join(args.console_env)}"] = Pty([*bringup, "console", "sim-on-gpu"],
                                                                            {**env, **extra})
                procs.extend(variant.values())
            floor = Pty([sys.executable, str(ROOT / "benchmarks" / "_textual_floor_app.py")], env)
            procs.append(floor)
            nvml_floor = subprocess.Popen([sys.executable, "-c", nvml_code], env=env, cwd=ROOT)
            engine = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_engine_only.py"), "--config",
                                       str(cfg), "sim-on-gpu"], env=env, cwd=ROOT)
            imports = subprocess.Popen([sys.executable, "-c", IMPORTS_FLOOR], env=env, cwd=ROOT)
            time.sleep(8)  # start-up is not the steady state
            windows = []
            for interval in (1.0,) if args.quiet_log else (2.0, 1.0, 0.5):
                nvitop = Pty([*nvitop_cmd, str(interval)], env)
                procs.append(nvitop)
                time.sleep(4)
                w = window({"bringup": console, **variant, "nvitop": nvitop, "textual floor": floor,
                            "bringup engine alone": engine, "nvml floor": nvml_floor,
                            "bringup imports alone": imports}, args.seconds)
                if not windows:  # where each one's RSS is, once: by mapping
                    result["rss_by_mapping_mib"] = {k: rss_by_mapping(p.pid) for k, p in (
                        ("bringup", console), *variant.items(), ("nvitop", nvitop), ("nvml floor", nvml_floor),
                        ("bringup engine alone", engine), ("bringup imports alone", imports))}
                w["nvitop"]["interval_s"] = interval
                w["bringup"]["refresh_hz"] = 1.0
                windows.append(w)
                print(json.dumps(w), flush=True)
                nvitop.stop()
            floor.stop()
            for v in variant.values():
                v.stop()
            if args.profile:
                result["profile"] = profile(args.profile, {"console": console.pid, "engine alone": engine.pid},
                                            args.seconds)
            for p in (engine, nvml_floor, imports):
                p.kill()
                p.wait()
            result["windows"], result["quiet_log"] = windows, args.quiet_log
            if not args.quiet_log:  # the quiet run: the one window above
                # the console alone against the server: what its probes and scrapes write into the server's own log
                logs = sorted(Path(d).glob("**/deployments/sim-on-gpu/logs/*.log"), key=lambda f: f.stat().st_mtime)
                before = logs[-1].read_text(errors="replace").count("\n") if logs else 0
                time.sleep(args.seconds)
                lines = logs[-1].read_text(errors="replace").splitlines()[before:] if logs else []
                result["server_log_lines_per_minute_from_the_console"] = access_lines(lines, args.seconds)
                print(json.dumps(result["server_log_lines_per_minute_from_the_console"]), flush=True)
                console.stop()
                fast = Pty([*bringup, "console", "sim-on-gpu"], {**env, "BRINGUP_UI__REFRESH_HZ": "2"})
                procs.append(fast)
                nvitop = Pty([*nvitop_cmd, "0.5"], env)
                procs.append(nvitop)
                time.sleep(8)
                w = window({"bringup": fast, "nvitop": nvitop}, args.seconds)
                w["bringup"]["refresh_hz"] = 2.0
                w["nvitop"]["interval_s"] = 0.5
                windows.append(w)
                print(json.dumps(w), flush=True)
                result["windows"] = windows
                result["what"] = ("bringup console (NVML, simulated SGLang server's logs and /metrics, probes) and nvitop's "
                                  "monitor, each in a 120x40 pseudo-terminal, same windows, GPU under load; with them, "
                                  "bringup's engine alone (nothing drawn) and the Textual floor (bringup's layout, two "
                                  "rows changing once a second, no work) and the NVML floor (Python sampling GPU 0 through "
                                  "NVML once a second)")
        finally:
            for p in procs:
                p.stop()
            load.kill()
            subprocess.run([*bringup, "stop", "sim-on-gpu"], env=env, cwd=ROOT, timeout=60)
    name = "console_vs_nvitop_quiet.json" if args.quiet_log else "console_vs_nvitop.json"
    (OUT / name).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
