"""GPU telemetry on a real NVIDIA GPU: agreement of NVML and nvidia-smi, memory-release latency, sampling cost,
side by side with nvitop. Run on a GPU host (needs torch for the load, nvitop for the comparison):

    OUT=results python3 benchmarks/gpu_h200.py

Writes OUT/gpu_h200.json with every figure and the raw outputs captured (nvidia-smi CSV with and without a
process, compute-apps, NVML readings), which tests/fixtures/gpu_h200/ keeps as fixtures.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tui.collectors.gpu_nvml import NvmlSource
from tui.collectors.gpu_smi import APP_FIELDS, QUERY_FIELDS, SmiSource, parse_apps_csv, parse_gpu_csv
from tui.lifecycle.release import release_status
from tui.model import GpuSnapshot
from tui.transport.local import LocalTransport

OUT = Path(os.environ.get("OUT", "results"))
CPU_SECONDS = float(os.environ.get("CPU_SECONDS", "30"))
ALLOC_GIB = float(os.environ.get("ALLOC_GIB", "100"))
HZ = os.sysconf("SC_CLK_TCK")
R: dict[str, object] = {}

LOAD = f"""
import sys, torch
x = torch.empty(int({ALLOC_GIB} * 2**30), dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
print("ready", flush=True)
while True:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
"""


def sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout


def smi_query() -> str:
    return sh("nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")


def smi_apps() -> str:
    return sh("nvidia-smi", "--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits")


def snap_dict(s: GpuSnapshot) -> dict[str, object]:
    return {"gpus": [g.__repr__() for g in s.gpus], "processes": [p.__repr__() for p in s.processes]}


def cpu_of(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / HZ  # self + reaped children


def start_load() -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", LOAD], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "ready", line
    return p


def capture(tag: str, nvml: NvmlSource) -> None:
    R[f"smi_{tag}"] = smi_query()
    R[f"smi_{tag}_with_units"] = sh("nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu,"
                                    "power.draw", "--format=csv")
    R[f"apps_{tag}"] = smi_apps()
    R[f"nvml_{tag}"] = snap_dict(nvml.sample())


def agreement(nvml: NvmlSource, n: int = 10) -> None:
    rows = []
    for _ in range(n):
        a = nvml.sample().gpus[0]
        smi = parse_gpu_csv(smi_query())[0]
        b = nvml.sample().gpus[0]
        assert a.mem_used_mib is not None and b.mem_used_mib is not None and smi.mem_used_mib is not None
        nv_used = (a.mem_used_mib + b.mem_used_mib) / 2
        rows.append({"nvml_used_mib": round(nv_used, 1), "smi_used_mib": smi.mem_used_mib,
                     "diff_pct_of_total": round(100 * abs(nv_used - smi.mem_used_mib) / (smi.mem_total_mib or 1), 3),
                     "nvml_util": [a.util_pct, b.util_pct], "smi_util": smi.util_pct})
        time.sleep(0.3)
    R["agreement_loaded"] = rows


NVML_LOOP = """
import sys, time, resource
sys.path.insert(0, sys.argv[1])
from tui.collectors.gpu_nvml import NvmlSource
src = NvmlSource(); end = time.monotonic() + float(sys.argv[2]); n = 0
while time.monotonic() < end:
    src.sample(); n += 1; time.sleep(0.5)
r = resource.getrusage(resource.RUSAGE_SELF)
print(r.ru_utime + r.ru_stime, n)
"""

SMI_LOOP = """
import asyncio, sys, time, resource
sys.path.insert(0, sys.argv[1])
from tui.collectors.gpu_smi import SmiSource
from tui.transport.local import LocalTransport
async def main():
    src = SmiSource(LocalTransport(), ["nvidia-smi"], interval_ms=500, apps_every_s=2.0)
    end = time.monotonic() + float(sys.argv[2]); n = 0
    agen = src.stream()
    async for s in agen:
        n += 1
        if time.monotonic() > end:
            break
    await agen.aclose()
    return n
n = asyncio.run(main())
s = resource.getrusage(resource.RUSAGE_SELF); c = resource.getrusage(resource.RUSAGE_CHILDREN)
print(s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime, n)
"""


def run_loop(code: str) -> dict[str, float]:
    root = str(Path(__file__).resolve().parent.parent)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code, root, str(CPU_SECONDS)], capture_output=True, text=True,
                         timeout=CPU_SECONDS + 60)
    wall = time.monotonic() - t0
    cpu, n = out.stdout.split()
    return {"cpu_s": round(float(cpu), 3), "wall_s": round(wall, 1), "samples": int(n),
            "cpu_percent": round(100 * float(cpu) / wall, 2)}


def run_nvitop(interval: float) -> dict[str, float]:
    """nvitop's monitor in a pseudo-terminal (120x40), its output drained, CPU from /proc over the window."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(TERM="xterm-256color", LINES="40", COLUMNS="120")
        os.execvp(sys.executable, [sys.executable, "-m", "nvitop", "-m", "full", "--interval", str(interval)])
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                os.read(fd, 65536)
            except OSError:
                return

    threading.Thread(target=drain, daemon=True).start()
    time.sleep(3)  # start-up is not the steady state
    c0, t0 = cpu_of(pid), time.monotonic()
    time.sleep(CPU_SECONDS)
    c1, t1 = cpu_of(pid), time.monotonic()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    stop.set()
    return {"interval_s": interval, "cpu_s": round(c1 - c0, 3), "wall_s": round(t1 - t0, 1),
            "cpu_percent": round(100 * (c1 - c0) / (t1 - t0), 2)}


def release_trials(nvml: NvmlSource, baseline: dict[int, float], trials: int = 3) -> None:
    """Kill a process holding ALLOC_GIB and time how long until bringup's rule says 'released' (NVML polled
    every 20 ms, and the nvidia-smi -lms 500 stream as the console would see it)."""
    nvml_times, smi_times = [], []
    for i in range(trials):
        load = start_load()
        time.sleep(1.0)
        snap = nvml.sample()
        pids = {p.pid for p in snap.processes} | {load.pid}
        use_smi = i % 2 == 1
        if use_smi:
            t = asyncio.run(_smi_release(load, pids, baseline))
            smi_times.append(t)
        else:
            load.send_signal(signal.SIGKILL)
            t0 = time.monotonic()
            while True:
                st = release_status(nvml.sample(), [0], pids, baseline, 1024.0)
                if st.released:
                    break
                if time.monotonic() - t0 > 60:
                    raise RuntimeError("not released in 60 s")
                time.sleep(0.02)
            nvml_times.append(round(time.monotonic() - t0, 3))
        load.wait()
        time.sleep(1.0)
    R["release_after_kill_s"] = {"nvml_poll_20ms": nvml_times, "smi_stream_500ms": smi_times,
                                 "alloc_gib": ALLOC_GIB}


async def _smi_release(load: subprocess.Popen[str], pids: set[int], baseline: dict[int, float]) -> float:
    src = SmiSource(LocalTransport(), ["nvidia-smi"], interval_ms=500, apps_every_s=0.0)
    agen = src.stream()
    t0 = None
    async for snap in agen:
        if t0 is None:
            load.send_signal(signal.SIGKILL)
            t0 = time.monotonic()
            continue
        if snap.gpus and release_status(snap, [0], pids, baseline, 1024.0).released:
            break
    await agen.aclose()
    assert t0 is not None
    return round(time.monotonic() - t0, 3)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    R["nvidia_smi_L"] = sh("nvidia-smi", "-L")
    R["driver"] = sh("nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader")
    nvml = NvmlSource()
    idle = nvml.sample()
    baseline = {g.index: g.mem_used_mib or 0.0 for g in idle.gpus}
    capture("idle", nvml)
    load = start_load()
    time.sleep(6)
    capture("loaded", nvml)
    agreement(nvml)
    R["cost_bringup_nvml_2hz"] = run_loop(NVML_LOOP)
    R["cost_bringup_smi_stream_500ms"] = run_loop(SMI_LOOP)
    try:
        R["cost_nvitop_0_5s"] = run_nvitop(0.5)
        R["cost_nvitop_default_2s"] = run_nvitop(2.0)
    except Exception as e:  # nvitop missing: say so, keep the rest
        R["cost_nvitop_error"] = repr(e)
    load.send_signal(signal.SIGKILL)
    load.wait()
    time.sleep(2)
    release_trials(nvml, baseline)
    R["apps_parsed_loaded"] = [p.__repr__() for p in parse_apps_csv(str(R["apps_loaded"]))]
    R["rusage_self"] = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    (OUT / "gpu_h200.json").write_text(json.dumps(R, indent=1))
    print(json.dumps({k: v for k, v in R.items() if not k.startswith(("smi_", "apps_", "nvml_"))}, indent=1))


if __name__ == "__main__":
    main()
