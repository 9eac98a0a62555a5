"""The restart proof on a real GPU host: a tensor-parallel stand-in (benchmarks/tp_standin.py: a process per rank,
real collectives, most of each GPU's memory held, ranks leaving one by one and one lingering) as a `process`
deployment; `bringup restart` with a flag change, several times, next to the seeds' `stop; sleep 8; start` on the
same server, counting real CUDA out-of-memory errors; and `bringup status --json` next to nvidia-smi at the same
moment.

    OUT=results python3 benchmarks/multigpu_restart.py [--restarts 3] [--naive 3]

Sizes itself to the host: with 8 GPUs, 8 ranks (NCCL, a rank a GPU) of `--mem-gib` (default 120) each; with one
GPU, 4 ranks sharing it (gloo: NCCL refuses two ranks on one device) of 30 GiB each. The last rank lingers 20 s after
the stop, the others leave a second apart. Writes OUT/multigpu_restart.json and the raw nvidia-smi and NVML readings
(OUT/smi_*.csv, OUT/nvml.json) to keep as fixtures. Keep NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1 in the environment: every process started here inherits it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", "results"))
STANDIN = ROOT / "benchmarks" / "tp_standin.py"
SMI_GPU = "index,uuid,memory.used,memory.total,utilization.gpu"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30).stdout


def gpu_used() -> list[float]:
    out = smi("--query-gpu=memory.used", "--format=csv,noheader,nounits")
    return [float(x) for x in out.split()]


def wait_baseline(base: list[float], timeout: float = 120.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all(u <= b + 1024 for u, b in zip(gpu_used(), base, strict=False)):
            return time.monotonic() - t0
        time.sleep(0.5)
    raise SystemExit("GPU memory never came back to its baseline")


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def naive_cycle(cmd: list[str], port: int, log: Path) -> dict[str, object]:
    """The seeds' restart: stop (the main process exits at once), sleep 8, start; then did the new run OOM?"""
    with log.open("w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    while not healthy(port):
        if time.monotonic() - t0 > 300 or p.poll() is not None:
            raise SystemExit(f"the stand-in never came up:\n{log.read_text()[-2000:]}")
        time.sleep(0.5)
    old_group = p.pid
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    time.sleep(8)
    log2 = log.with_suffix(".next.log")
    with log2.open("w") as f:
        q = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    t1 = time.monotonic()
    result = "timeout"
    while time.monotonic() - t1 < 300:
        text = log2.read_text(errors="replace")
        if "out of memory" in text.lower():
            result = "cuda-oom"
            break
        if healthy(port):
            result = "ready"
            break
        if q.poll() is not None:
            result = f"exited {q.returncode}"
            break
        time.sleep(0.5)
    for pg in (old_group, q.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pg, signal.SIGKILL)
    return {"result": result}


def portable(text: str) -> str:
    """Results name no path of the machine they ran on: they are read on others."""
    return text.replace(sys.executable, "python3").replace(str(ROOT) + "/", "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--naive", type=int, default=3)
    ap.add_argument("--mem-gib", type=float, default=0.0)
    ap.add_argument("--detach-ranks", action="store_true", help="the stand-in's ranks outside the main process's "
                    "session: the stop returns once the main process is gone, and the release wait does the waiting")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    n_gpus = len(gpu_used())
    tp, mem = (n_gpus, args.mem_gib or 120.0) if n_gpus > 1 else (4, args.mem_gib or 30.0)
    port = free_port()
    cmd = [sys.executable, "-u", str(STANDIN), "--tp", str(tp), "--mem-gib", f"{mem:g}", "--port", str(port),
           "--linger-rank", str(tp - 1), "--linger-s", "20", "--exit-step-s", "1",
           *(["--detach-ranks"] if args.detach_ranks else [])]
    R: dict[str, object] = {"detach_ranks": args.detach_ranks, "gpus": n_gpus, "ranks": tp, "mem_gib_per_rank": mem,
                            "backend": "nccl" if n_gpus >= tp else "gloo (ranks share the GPU)",
                            "smi_version": smi("--version").strip().splitlines()[:3]}
    base = gpu_used()
    (OUT / "smi_idle.csv").write_text(smi(f"--query-gpu={SMI_GPU}", "--format=csv,noheader,nounits"))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cfg = d / "config.toml"
        cfg.write_text(
            f'state_dir = "{d}/state"\n[deployments.tp]\nmanager = "process"\npreset = "sglang"\n'
            f'endpoint = "http://127.0.0.1:{port}"\nrelease_timeout_s = 300\nstop_timeout_s = 60\n'
            f"command = {json.dumps(cmd)}\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

        def bringup(*a: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *a], capture_output=True,
                                  text=True, timeout=timeout, env=env, cwd=tmp)

        r = bringup("start", "tp")
        R["start"] = {"rc": r.returncode, "out": portable(r.stdout[-3000:]), "err": portable(r.stderr[-2000:])}
        if r.returncode != 0:
            (OUT / "multigpu_restart.json").write_text(json.dumps(R, indent=1))
            raise SystemExit(r.stdout + r.stderr)
        # the panel's figures and nvidia-smi's at the same moment
        st = bringup("status", "tp", "--json")
        smi_now = smi(f"--query-gpu={SMI_GPU}", "--format=csv,noheader,nounits")
        apps = smi("--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits")
        (OUT / "smi_serving.csv").write_text(smi_now)
        (OUT / "smi_apps_serving.csv").write_text(apps)
        status = json.loads(st.stdout)
        R["status_vs_smi"] = {"bringup": [(g["index"], g["mem_used_mib"], g["util_pct"])
                                          for g in status["gpus"]["gpus"]],
                              "nvidia_smi": smi_now.strip().splitlines(), "attribution": status["attribution"],
                              "apps": apps.strip().splitlines()}
        try:
            import pynvml as nv

            nv.nvmlInit()
            readings = []
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                m = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
                readings.append({"index": i, "used": m.used, "total": m.total, "reserved": m.reserved,
                                 "procs": [(p.pid, p.usedGpuMemory) for p in
                                           nv.nvmlDeviceGetComputeRunningProcesses(h)]})
            (OUT / "nvml.json").write_text(json.dumps(readings, indent=1))
        except Exception as e:
            R["nvml_error"] = repr(e)
        restarts = []
        for i in range(args.restarts):
            flag = ["--set", "disable-cuda-graph"] if i % 2 == 0 else ["--unset", "disable-cuda-graph"]
            t0 = time.monotonic()
            r = bringup("restart", "tp", *flag, "--yes")
            took = time.monotonic() - t0
            release = [ln for ln in r.stdout.splitlines() if "release" in ln]
            (OUT / f"restart_{i + 1}.txt").write_text(portable(r.stdout + r.stderr))
            restarts.append({"rc": r.returncode, "seconds": round(took, 1),
                             "release_lines": [portable(x) for x in release[-12:]],
                             "oom": "out of memory" in (r.stdout + r.stderr).lower(),
                             "tail": [portable(x) for x in r.stdout.splitlines()[-3:]]})
            print(f"restart {i + 1}: rc={r.returncode} {took:.1f} s; {release[-1] if release else ''}", flush=True)
        R["restarts"] = restarts
        R["held_pids_named"] = sum(bool(re.search(r"by PID \d", " ".join(x["release_lines"]))) for x in restarts)
        bringup("stop", "tp")
        wait_baseline(base)
        naive = []
        for i in range(args.naive):
            naive.append(naive_cycle(cmd, port, d / f"naive-{i}.log"))
            print(f"naive {i + 1}: {naive[-1]}", flush=True)
            wait_baseline(base)
        R["naive"] = naive
    R["summary"] = {"bringup_restarts_ready": sum(x["rc"] == 0 for x in restarts),
                    "bringup_ooms": sum(x["oom"] for x in restarts),
                    "naive_ooms": sum(x["result"] == "cuda-oom" for x in naive), "naive_runs": len(naive)}
    (OUT / "multigpu_restart.json").write_text(json.dumps(R, indent=1) + "\n")
    print(json.dumps(R["summary"]))


if __name__ == "__main__":
    main()
