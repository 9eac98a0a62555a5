"""Restart dead time and OOMs: bringup's release wait vs a hand-written `stop; sleep 8; start` (simulated server).

    .venv/bin/python benchmarks/restart_dead_time.py [--n 20] [--time-scale 0.1] [--seed 1]

`--scenario oom-on-fast-restart`: after a process exits its simulated GPU memory is released GPU by GPU over
`--sim-release-delay` x time-scale seconds (each GPU at 0.3..1.0 of it); a server started while memory is still held
dies with `CUDA out of memory`. Release delays are drawn uniformly in [1, 20] s of simulated time; with time-scale
0.1 the real delays are 0.1-2.0 s, and the hand-written fixed `sleep 8` becomes a real `sleep 0.8`.

bringup: the deployment declares `extra_flags = [{name = "sim-release-delay", kind = "float"}]`; restart i is
`python -m tui restart sim --yes --json --set sim-release-delay=D[i+1]` while the outgoing process runs with D[i]
(so the delay being waited out is D[i]). From the one-JSON-object-per-step output (arrival times of the lines):
dead time = arrival of `start running` - arrival of `release done`. Also measured: start issued minus the true
moment the old process's memory was fully released (from the sim's holder file: exited + delay x max fraction).
OOM-free = the new invocation's log has no "CUDA out of memory".
the hand-written procedure: trial i starts `python -m tui.sim` directly with D[i], waits for its ready line, SIGTERM, waits for the exit,
sleeps 8 x time-scale, starts a second one and records whether it prints "CUDA out of memory" before ready.
Writes benchmarks/results/restart_dead_time.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from _simbench import (
    READY_LINE,
    ROOT,
    FlagConfig,
    SimDeploy,
    free_port,
    kill_leftovers,
    leftovers,
    machine,
    portable,
    summary,
)

from tui.sim.gpus import release_fraction

OOM = "CUDA out of memory"
EXTRA = [FlagConfig(name="sim-release-delay", kind="float")]


class HolderWatch(threading.Thread):
    """Polls the sim's holder file of one pid every 10 ms, keeping the last content seen (it may be removed)."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.last, self.stop = path, None, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.01):
            try:
                d = json.loads(self.path.read_text())
                self.last = d
            except (OSError, ValueError):
                pass


def true_release(h: dict[str, Any] | None) -> float | None:
    if not h or not h.get("exited"):
        return None
    fr = max(release_fraction(int(h["pid"]), int(g)) for g in h.get("gpus", {}) or {"0": 0})
    return float(h["exited"]) + float(h.get("release_delay", 0)) * fr


def bringup_trials(base: Path, delays: list[float], ts: float) -> list[dict[str, Any]]:
    d = SimDeploy(base / "bringup", scenario="oom-on-fast-restart", time_scale=ts, extra_flags=EXTRA,
                  release_timeout_s=120)
    out: list[dict[str, Any]] = []
    try:
        r = d.run_cli("restart", "sim", "--yes", "--set", f"sim-release-delay={delays[0]:.3f}", timeout=90)
        if r.returncode != 0:
            return [{"error": f"initial bring-up rc={r.returncode}: {r.stderr[-600:]} {r.stdout[-600:]}"}]
        for i in range(len(delays) - 1):
            old = d.current() or {}
            old_pid = int(old.get("pid") or 0)
            hw = HolderWatch(d.sim_state / "holders" / f"{old_pid}.json")
            hw.start()
            t_cmd = time.time()
            p = subprocess.Popen(d.cli("restart", "sim", "--yes", "--json", "--set",
                                       f"sim-release-delay={delays[i + 1]:.3f}"),
                                 cwd=d.tmp, env=d.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            steps: list[dict[str, Any]] = []
            assert p.stdout is not None
            for line in iter(p.stdout.readline, ""):
                t = time.time()
                line = line.strip()
                if line.startswith("{") and line.endswith("}"):
                    try:
                        o = json.loads(line)
                    except ValueError:
                        continue
                    if "step" in o:
                        o["at"] = t
                        steps.append(o)
            try:
                rc = p.wait(90)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = -9
            err = p.stderr.read() if p.stderr else ""
            hw.stop.set()
            hw.join(1)
            rel_done = next((s["at"] for s in steps if s["step"] == "release" and s["status"] == "done"), None)
            start_run = next((s["at"] for s in steps if s["step"] == "start" and s["status"] == "running"), None)
            stop_done = next((s["at"] for s in steps if s["step"] == "stop" and s["status"] in ("done", "skipped")),
                             None)
            new_inv = str((d.current() or {}).get("invocation", ""))
            log = d.log_lines(new_inv)
            oom = any(OOM in x for _, x in log)
            ready_line = next((t for t, x in log if READY_LINE in x), None)
            tr = true_release(hw.last)
            rec = {"i": i, "release_delay_sim_s": delays[i], "release_delay_real_s": delays[i] * ts, "rc": rc,
                   "oom": oom, "reached_ready_line": ready_line is not None,
                   "dead_time_s": (start_run - rel_done) if (start_run and rel_done) else None,
                   "start_minus_true_release_s": (start_run - tr) if (start_run and tr) else None,
                   "stop_done_to_start_s": (start_run - stop_done) if (start_run and stop_done) else None,
                   "restart_wall_s": time.time() - t_cmd,
                   "steps": [{k: s[k] for k in ("step", "status", "detail", "at")} for s in steps],
                   "stderr_tail": err[-300:]}
            out.append(rec)
            print(f"bringup restart {i}: delay {delays[i] * ts:.2f} s real, rc {rc}, oom {oom}, dead "
                  f"{rec['dead_time_s']}, vs true release {rec['start_minus_true_release_s']}", flush=True)
        return out
    finally:
        d.run_cli("stop", "sim")
        kill_leftovers(str(d.tmp))


def _start_sim(cmd: list[str], log: Path) -> tuple[subprocess.Popen[bytes], Any]:
    f = open(log, "wb")  # noqa: SIM115
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                            start_new_session=True), f


def _wait_text(p: subprocess.Popen[bytes], log: Path, needles: tuple[str, ...], timeout: float) -> str | None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = log.read_text(errors="replace")
        for n in needles:
            if n in text:
                return n
        if p.poll() is not None:
            text = log.read_text(errors="replace")
            return next((n for n in needles if n in text), "exited")
        time.sleep(0.02)
    return None


def _kill(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        try:
            import os

            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            p.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(5)


def poll_trials(base: Path, delays: list[float], ts: float) -> list[dict[str, Any]]:
    out = []
    for i, dl in enumerate(delays):
        tmp = base / "hand_written" / str(i)
        tmp.mkdir(parents=True, exist_ok=True)
        d = SimDeploy(tmp, scenario="oom-on-fast-restart", time_scale=ts)  # only for its sim command
        port = free_port()
        a, fa = _start_sim(d.sim_command("--sim-release-delay", f"{dl:.3f}", port=port), tmp / "a.log")
        b = None
        fb = None
        try:
            got = _wait_text(a, tmp / "a.log", (READY_LINE,), 60)
            if got != READY_LINE:
                out.append({"i": i, "error": f"first server: {got}"})
                continue
            a.send_signal(signal.SIGTERM)  # systemctl stop: SIGTERM, wait for the exit
            a.wait(30)
            time.sleep(8 * ts)  # sleep 8
            b, fb = _start_sim(d.sim_command("--sim-release-delay", f"{dl:.3f}", port=port), tmp / "b.log")
            got = _wait_text(b, tmp / "b.log", (OOM, READY_LINE), 60)
            rec = {"i": i, "release_delay_sim_s": dl, "release_delay_real_s": dl * ts, "oom": got == OOM,
                   "outcome": got}
            out.append(rec)
            print(f"hand-written trial {i}: delay {dl * ts:.2f} s real -> {got}", flush=True)
        finally:
            _kill(a)
            if b is not None:
                _kill(b)
            fa.close()
            if fb:
                fb.close()
            kill_leftovers(str(tmp))
    return out


def fmt(s: dict[str, Any]) -> str:
    f = lambda x: "-" if x is None else (f"{x * 1000:.2f} ms" if x < 0.1 else f"{x:.3f} s")  # noqa: E731
    return f"n={s['n']:<3} p50={f(s['p50'])}  p95={f(s['p95'])}  max={f(s['max'])}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--time-scale", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "restart_dead_time.json"))
    a = ap.parse_args()
    rng = random.Random(a.seed)
    delays = [rng.uniform(1.0, 20.0) for _ in range(a.n + 1)]
    base = Path(tempfile.mkdtemp(prefix="bringup-bench-rst-"))
    t0 = time.time()
    try:
        br = bringup_trials(base, delays, a.time_scale)
        t1 = time.time()
        sd = poll_trials(base, delays[:a.n], a.time_scale)
        t2 = time.time()
    finally:
        left = kill_leftovers(str(base))
        still = leftovers(str(base))
        shutil.rmtree(base, ignore_errors=True)
    ok_b = [r for r in br if "error" not in r]
    ok_s = [r for r in sd if "error" not in r]
    dead = [r["dead_time_s"] for r in ok_b if r.get("dead_time_s") is not None]
    vs_true = [r["start_minus_true_release_s"] for r in ok_b if r.get("start_minus_true_release_s") is not None]
    res = {
        "what": "restart through bringup (release wait) vs the hand-written stop; sleep 8; start, simulated SGLang server, "
                "--scenario oom-on-fast-restart, random --sim-release-delay in [1, 20] s x time-scale",
        "command": "python benchmarks/restart_dead_time.py " + " ".join(sys.argv[1:]),
        "machine": machine(), "time_scale": a.time_scale, "n": a.n, "rng_seed": a.seed,
        "release_delay_real_s_range": [1.0 * a.time_scale, 20.0 * a.time_scale],
        "poll_sleep_real_s": 8 * a.time_scale,
        "bringup": {"restarts": len(ok_b), "oom_free": sum(1 for r in ok_b if not r["oom"]),
                    "rc0": sum(1 for r in ok_b if r["rc"] == 0),
                    "dead_time_s": summary(dead), "start_minus_true_release_s": summary(vs_true),
                    "dead_time_target_s": 0.5, "dead_time_under_target": sum(1 for x in dead if x < 0.5),
                    "wall_s": t1 - t0},
        "hand_written": {"trials": len(ok_s), "oom_free": sum(1 for r in ok_s if not r["oom"]), "wall_s": t2 - t1},
        "errors": [r["error"] for r in br + sd if "error" in r],
        "leftover_pids_killed_at_end": left, "leftover_pids_after_cleanup": still,
        "bringup_trials": br, "poll_trials": sd,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(portable(json.dumps(res, indent=2, default=str)) + "\n", encoding="utf-8")
    b, s = res["bringup"], res["hand_written"]
    print(f"\nrestart dead time, time-scale {a.time_scale} (real release delays 0.1-2.0 s x {a.time_scale / 0.1:g}), "
          f"{machine()['platform']}, {machine()['cores']} cores")
    print(f"{'bringup restart: OOM-free':<44} {b['oom_free']}/{b['restarts']} (rc 0: {b['rc0']})")
    print(f"{'hand-written stop; sleep 8; start: OOM-free':<44} {s['oom_free']}/{s['trials']}")
    print(f"{'bringup dead time (release done -> start)':<44} {fmt(b['dead_time_s'])}  "
          f"(<0.5 s: {b['dead_time_under_target']}/{len(dead)})")
    print(f"{'bringup start - true release (sim holder)':<44} {fmt(b['start_minus_true_release_s'])}")
    print(f"errors: {len(res['errors'])}, leftovers after cleanup: {still}, wall {t2 - t0:.0f} s")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
