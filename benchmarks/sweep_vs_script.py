"""The seeds' sweep, reproduced on the simulated server: bringup's `sweep` against the operator's script, one run.

    .venv/bin/python benchmarks/sweep_vs_script.py [--time-scale 0.1] [--release-delay 15]

Four DFlash configurations (budget = `--speculative-num-draft-tokens`, topk = `--speculative-eagle-topk`, CUDA graphs
off, as the campaign ended up), a benchmark matrix of two concurrency levels, and a server whose GPU memory takes
`--release-delay` simulated seconds to come back after it exits (`--scenario oom-on-fast-restart`: a server started
while memory is still held dies with `CUDA out of memory`). The campaign's delays were longer than its fixed 8 s.

- the script (what the seeds ran, step for step): write the configuration's flags into the command (their `sed` on
  the unit), `stop` (SIGTERM, wait for the exit, as `systemctl stop` does), `sleep 8`, `start`, poll `/v1/models`
  every 15 s until it answers or the process is gone, then the benchmark (the same streaming requests bringup's
  `bench` sends). Times are scaled by `--time-scale` (8 s -> 0.8 s at 0.1), as the simulated server's are.
- bringup: `bringup sweep sim plan.toml --yes --json` on a `process` deployment of the same server.

Counted for each: configurations measured (every cell valid), configurations that "failed to start", runs that hit
CUDA OOM, and wall time. Writes benchmarks/results/sweep_vs_script.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from _simbench import ROOT, SimDeploy, free_port, kill_leftovers, machine

from tui.ops.bench import BenchError, bench

OOM = "CUDA out of memory"
#: budget (verify window) x topk, the seeds' "sweep budgets/topk"
CONFIGS = [(8, 4), (16, 4), (8, 8), (16, 8)]
BASE = ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "z-lab/Kimi-K2.6-DFlash",
        "--disable-cuda-graph")
CONCURRENCY = [1, 4]
REQUESTS = 4
PROMPT_TOKENS = 64
OUTPUT_TOKENS = 16


def plan_text() -> str:
    configs = "".join(f'[[configs]]\nname = "budget={b},topk={k}"\n'
                      f"set = {{ speculative-num-draft-tokens = {b}, speculative-eagle-topk = {k} }}\n"
                      for b, k in CONFIGS)
    return (f"{configs}\n[matrix]\nprompt_tokens = [{PROMPT_TOKENS}]\noutput_tokens = [{OUTPUT_TOKENS}]\n"
            f"concurrency = {CONCURRENCY}\nrequests = {REQUESTS}\nwarmup_requests = 1\n")


def flags_of(budget: int, topk: int) -> list[str]:
    return ["--speculative-num-draft-tokens", str(budget), "--speculative-eagle-topk", str(topk)]


# ------------------------------------------------------------------------------------------------ the script


def _alive(p: subprocess.Popen[bytes]) -> bool:
    return p.poll() is None


def _models_answer(port: int) -> bool:
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5, trust_env=False)
        return r.status_code == 200 and '"id"' in r.text
    except httpx.HTTPError:
        return False


def script_sweep(base: Path, ts: float, delay: float) -> dict[str, Any]:
    d = SimDeploy(base / "script", scenario="oom-on-fast-restart", time_scale=ts)  # only for its sim command
    port = free_port()
    logs = base / "script" / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def start(extra: list[str], name: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = logs / f"{name}.log"
        with open(log, "wb") as f:
            p = subprocess.Popen(d.sim_command("--sim-release-delay", str(delay), *BASE, *extra, port=port),
                                 stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        return p, log

    t0 = time.monotonic()
    configs: list[dict[str, Any]] = []
    server, _ = start(flags_of(*CONFIGS[0]), "initial")
    deadline = time.monotonic() + 300 * ts
    while not _models_answer(port) and _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)  # the first server, before the sweep: as the seeds' was, up and serving
    try:
        for budget, topk in CONFIGS:
            name = f"budget={budget},topk={topk}"
            server.send_signal(signal.SIGTERM)  # systemctl stop: SIGTERM, wait for the exit
            server.wait(60)
            time.sleep(8 * ts)  # sleep 8
            server, log = start(flags_of(budget, topk), name)  # systemctl start
            ready = False
            deadline = time.monotonic() + 300 * ts
            while time.monotonic() < deadline:  # their poll: is-active, then /v1/models, every 15 s
                if not _alive(server):
                    break
                if _models_answer(port):
                    ready = True
                    break
                time.sleep(15 * ts)
            oom = OOM in log.read_text(errors="replace")
            rec: dict[str, Any] = {"config": name, "oom": oom}
            if not ready:
                rec["result"] = "failed to start"
            else:
                try:
                    res = asyncio.run(bench(f"http://127.0.0.1:{port}", CONCURRENCY, requests=REQUESTS,
                                            prompt_tokens=PROMPT_TOKENS, max_tokens=OUTPUT_TOKENS, timeout=60))
                    levels = res["levels"]
                    ok = all(lv["ok"] == lv["requests"] for lv in levels)  # type: ignore[union-attr]
                    rec["result"] = "measured" if ok else "measured with failed requests"
                    rec["tok_s"] = [lv["aggregate_tps"] for lv in levels]  # type: ignore[union-attr]
                except BenchError as e:
                    rec["result"] = f"benchmark failed: {e}"
            configs.append(rec)
            print(f"script:  {name}: {rec['result']}{' (CUDA OOM)' if oom else ''}", flush=True)
    finally:
        if _alive(server):
            server.send_signal(signal.SIGKILL)
            server.wait(10)
    return {"wall_s": round(time.monotonic() - t0, 1), "configs": configs,
            "measured": sum(c["result"] == "measured" for c in configs),
            "failed_to_start": sum(c["result"] == "failed to start" for c in configs),
            "oom_runs": sum(c["oom"] for c in configs)}


# ------------------------------------------------------------------------------------------------ bringup


def bringup_sweep(base: Path, ts: float, delay: float) -> dict[str, Any]:
    d = SimDeploy(base / "bringup", scenario="oom-on-fast-restart", time_scale=ts,
                  sim_args=("--sim-release-delay", str(delay), *BASE, *flags_of(*CONFIGS[0])))
    plan = base / "plan.toml"
    plan.write_text(plan_text())
    out = base / "bringup" / "results"
    try:
        r = d.run_cli("start", "sim", timeout=120)
        assert r.returncode == 0, r.stderr
        r = d.run_cli("wait", "sim", "--timeout", str(300 * ts + 30), timeout=400)
        assert r.returncode == 0, r.stderr
        t0 = time.monotonic()
        r = d.run_cli("sweep", "sim", str(plan), "--out", str(out), "--yes", "--json", timeout=1200)
        wall = time.monotonic() - t0
        recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
        cells = {(c["config"], c["cell"]): c for c in recs if c.get("type") == "cell"}
        configs = []
        for budget, topk in CONFIGS:
            name = f"budget={budget},topk={topk}"
            status = [c for c in recs if c.get("type") == "config" and c["config"] == name]
            mine = [c for (cfg, _), c in cells.items() if cfg == name]
            valid = [c for c in mine if c["valid"] and not c["metrics"].get("failed")]
            measured = bool(status) and status[-1]["status"] == "ready" and len(valid) == len(CONCURRENCY)
            configs.append({"config": name, "status": status[-1]["status"] if status else "none",
                            "result": "measured" if measured else "not measured",
                            "tok_s": [c["metrics"].get("tok_s_total") for c in valid]})
            print(f"bringup: {name}: {configs[-1]['result']}", flush=True)
        logs = list((d.run_dir / "logs").glob("*.log"))
        oom = sum(OOM in f.read_text(errors="replace") for f in logs)
        return {"wall_s": round(wall, 1), "rc": r.returncode, "configs": configs,
                "measured": sum(c["result"] == "measured" for c in configs),
                "failed_to_start": sum(c["status"] == "failed" for c in configs), "oom_runs": oom,
                "runs_started": len(logs)}
    finally:
        d.run_cli("stop", "sim", timeout=120)
        kill_leftovers(str(d.tmp))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-scale", type=float, default=0.1)
    ap.add_argument("--release-delay", type=float, default=15.0,
                    help="simulated seconds the GPU memory takes to come back after an exit (the script sleeps 8)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sweep_vs_script.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bringup-sweep-bench-") as tmp:
        base = Path(tmp)
        try:
            script = script_sweep(base, args.time_scale, args.release_delay)
            ours = bringup_sweep(base, args.time_scale, args.release_delay)
        finally:
            kill_leftovers(tmp)
    result = {"machine": machine(), "time_scale": args.time_scale,
              "release_delay_sim_s": args.release_delay, "fixed_sleep_sim_s": 8,
              "configs": [f"budget={b},topk={k}" for b, k in CONFIGS], "concurrency": CONCURRENCY,
              "requests_per_cell": REQUESTS, "script": script, "bringup": ours}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"script:  {script['measured']}/4 measured, {script['failed_to_start']} failed to start, "
          f"{script['oom_runs']} CUDA OOM, {script['wall_s']} s")
    print(f"bringup: {ours['measured']}/4 measured, {ours['failed_to_start']} failed, {ours['oom_runs']} CUDA OOM, "
          f"{ours['wall_s']} s")


if __name__ == "__main__":
    main()
