"""Failure and ready detection latency of bringup vs a hand-written 15 s polling loop, on the simulated server.

    .venv/bin/python benchmarks/lifecycle_latency.py [--runs 10] [--seed-runs 3] [--stale-runs 5] [--time-scale 0.2]

(a) `--scenario crash-while-serving` (crashes ~10 s x time-scale after ready): latency = the time a `tui.engine.Engine`
    in this process reports phase failed (time.time() taken in a `w.subscribe` callback) minus the supervisor's
    timestamp of the sim's fatal line (`Subprocess scheduler_3 ... crashed`) in `<state>/deployments/sim/logs/`.
(b) ready latency: the sim's `The server is fired up and ready to roll!` line -> the Engine reports ready (same runs);
    and `--scenario stale-health` through `python -m tui restart sim --yes --json` (the old process keeps answering
    /v1/models for 8 s x time-scale after SIGTERM): false readies = a ready reported for the new invocation before
    its own ready line (also counted: any ready reported between the restart command and the new ready line).
(c) the polling loop on the same crashes: every 15 s (real seconds, first check at a random phase in [0, 15) s after
    the start), is the process alive and does GET /v1/models answer with an "id"; latency = end of the first failing
    check that started after the fatal line, minus the fatal line's timestamp.
Writes benchmarks/results/lifecycle_latency.json. Probe settings are bringup's defaults (interval 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from _simbench import READY_LINE, ROOT, SimDeploy, kill_leftovers, leftovers, machine, pid_alive, portable, summary

from tui.engine import Engine, PhaseChanged, Update

FATAL = "crashed with exit code"
SEED_PERIOD = 15.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def polling_loop(d: SimDeploy, t0: float, stop: threading.Event, checks: list[dict[str, Any]], phase: float) -> None:
    """The polling loop: every 15 s, process alive? and /v1/models answers with an "id"?"""
    k = 0
    while True:
        t_next = t0 + phase + SEED_PERIOD * k
        if stop.wait(max(0.0, t_next - time.time())):
            return
        tc = time.time()
        cur = d.current() or {}
        alive = pid_alive(int(cur.get("pid") or 0))
        models = False
        try:
            body = _OPENER.open(f"http://127.0.0.1:{d.port}/v1/models", timeout=5).read()
            models = b'"id"' in body
        except OSError:
            pass
        checks.append({"start": tc, "end": time.time(), "alive": alive, "models_ok": models})
        k += 1


class Recorder:
    def __init__(self, w: Engine) -> None:
        self.events: list[tuple[float, str, str]] = []
        self.w = w
        w.subscribe(self.on)

    def on(self, u: Update) -> None:
        if isinstance(u, PhaseChanged):  # the reducer's phase as it changed (the snapshot says `unknown` until the
            st = self.w.state            # unit has been read, which is not what this measures)
            self.events.append((time.time(), str(st.phase), st.invocation))

    def first(self, phase: str, inv: str = "", after: float = 0.0) -> float | None:
        for t, p, i in self.events:
            if p == phase and t >= after and (not inv or i == inv or inv.startswith(i) or i.startswith(inv)):
                return t
        return None


async def wait_until(cond: Any, timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(step)
    return False


async def crash_run(i: int, base: Path, ts: float, with_poll: bool) -> dict[str, Any]:
    d = SimDeploy(base / f"crash{i}", scenario="crash-while-serving", time_scale=ts)
    settings = d.settings()
    name, dep = settings.deployment("sim")
    w = Engine(settings, name, dep)
    rec = Recorder(w)
    await w.start()
    out: dict[str, Any] = {"run": i}
    stop = threading.Event()
    checks: list[dict[str, Any]] = []
    th = None
    try:
        t0 = time.time()
        p = await asyncio.create_subprocess_exec(*d.cli("start", "sim", "--no-wait"), cwd=d.tmp, env=d.env,
                                                 stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await p.communicate()
        if p.returncode != 0:
            out["error"] = f"start rc={p.returncode}: {err.decode()[-500:]}"
            return out
        if with_poll:
            phase = random.uniform(0, SEED_PERIOD)
            out["poll_phase_s"] = phase
            th = threading.Thread(target=polling_loop, args=(d, t0, stop, checks, phase), daemon=True)
            th.start()
        ok = await wait_until(lambda: rec.first("failed") is not None, 60 * ts + 30)
        inv = str((d.current() or {}).get("invocation", ""))
        crash_ts = d.log_time(inv, FATAL)
        ready_ts = d.log_time(inv, READY_LINE)
        out.update(invocation=inv, fatal_line_at=crash_ts, ready_line_at=ready_ts)
        if not ok or crash_ts is None:
            out["error"] = f"no failed phase / fatal line (events {rec.events[-5:]})"
            return out
        t_failed = rec.first("failed", inv)
        t_ready = rec.first("ready", inv)
        out["failed_seen_at"] = t_failed
        out["ready_seen_at"] = t_ready
        out["failure_latency_s"] = (t_failed - crash_ts) if t_failed else None
        out["ready_latency_s"] = (t_ready - ready_ts) if (t_ready and ready_ts) else None
        out["failure_kind"] = getattr(w.state.failure, "kind", None)
        if with_poll:
            def seed_detect() -> dict[str, Any] | None:
                for c in list(checks):
                    if c["start"] >= crash_ts and not (c["alive"] and c["models_ok"]):
                        return c
                return None
            await wait_until(lambda: seed_detect() is not None, SEED_PERIOD + 10)
            c = seed_detect()
            out["poll_checks"] = checks[:]
            out["poll_latency_s"] = (c["end"] - crash_ts) if c else None
        return out
    finally:
        stop.set()
        if th:
            th.join(6)
        await w.close()
        await asyncio.to_thread(d.run_cli, "stop", "sim")
        out["leftover_pids_killed"] = kill_leftovers(str(d.tmp))


async def stale_run(i: int, base: Path, ts: float) -> dict[str, Any]:
    d = SimDeploy(base / f"stale{i}", scenario="stale-health", time_scale=ts)
    out: dict[str, Any] = {"run": i}
    w = None
    try:
        r = await asyncio.to_thread(d.run_cli, "restart", "sim", "--yes", timeout=90)
        if r.returncode != 0:
            out["error"] = f"initial bring-up rc={r.returncode}: {r.stderr[-500:]} {r.stdout[-500:]}"
            return out
        old_inv = str((d.current() or {}).get("invocation", ""))
        settings = d.settings()
        name, dep = settings.deployment("sim")
        w = Engine(settings, name, dep)
        rec = Recorder(w)
        await w.start()
        await wait_until(lambda: str(w.state.phase) == "ready", 15)
        out["old_ready_seen"] = str(w.state.phase) == "ready"
        t_cmd = time.time()
        # a polled-style /v1/models check every 50 ms during the restart: does the old process still answer?
        stop_poll = threading.Event()
        polls: list[tuple[float, bool]] = []

        def poll_models() -> None:
            while not stop_poll.wait(0.05):
                ok = False
                with contextlib.suppress(OSError):
                    ok = b'"id"' in _OPENER.open(f"http://127.0.0.1:{d.port}/v1/models", timeout=2).read()
                polls.append((time.time(), ok))

        poller = threading.Thread(target=poll_models, daemon=True)
        poller.start()
        p = await asyncio.create_subprocess_exec(*d.cli("restart", "sim", "--yes", "--json"), cwd=d.tmp, env=d.env,
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        so, se = await asyncio.wait_for(p.communicate(), 120)
        stop_poll.set()
        poller.join(3)
        out["restart_rc"] = p.returncode
        out["restart_seconds"] = time.time() - t_cmd
        new_inv = str((d.current() or {}).get("invocation", ""))
        ready_ts = d.log_time(new_inv, READY_LINE)
        await wait_until(lambda: rec.first("ready", new_inv, after=t_cmd) is not None, 10)
        t_ready = rec.first("ready", new_inv, after=t_cmd)
        false_new = [e for e in rec.events if e[1] == "ready" and e[0] >= t_cmd and new_inv and
                     (e[2] == new_inv or new_inv.startswith(e[2]) or e[2].startswith(new_inv))
                     and ready_ts is not None and e[0] < ready_ts]
        any_early = [e for e in rec.events if e[1] == "ready" and t_cmd <= e[0] and ready_ts is not None
                     and e[0] < ready_ts]
        new_log = d.log_lines(new_inv)
        new_first = new_log[0][0] if new_log else None
        sigterm_at = d.log_time(old_inv, "SIGTERM received")
        out["old_sigterm_line_at"] = sigterm_at
        out["new_process_first_line_at"] = new_first
        # answers with an "id" after the old process was told to stop and before the new one printed anything:
        # only the old (stale) process can have given them
        out["models_answers_before_new_process"] = sum(
            1 for t, ok in polls if ok and sigterm_at and new_first and sigterm_at < t < new_first)
        out["models_stale_window_s"] = (new_first - sigterm_at) if (sigterm_at and new_first) else None
        out["models_answers_before_new_ready_line"] = sum(1 for t, ok in polls if ok and ready_ts and t < ready_ts)
        out["models_polls_before_new_ready_line"] = sum(1 for t, _ in polls if ready_ts and t < ready_ts)
        # what the restart command itself printed: it must not say ready before the new ready line
        steps = [json.loads(x) for x in so.decode().splitlines() if x.startswith("{") and x.endswith("}")]
        out.update(old_invocation=old_inv, new_invocation=new_inv, new_ready_line_at=ready_ts,
                   ready_seen_at=t_ready, ready_latency_s=(t_ready - ready_ts) if (t_ready and ready_ts) else None,
                   false_readies_new_invocation=len(false_new), readies_before_new_ready_line=len(any_early),
                   events_after_restart=[e for e in rec.events if e[0] >= t_cmd],
                   restart_steps=steps[-8:], restart_stderr=se.decode()[-300:])
        return out
    finally:
        if w is not None:
            await w.close()
        await asyncio.to_thread(d.run_cli, "stop", "sim")
        out["leftover_pids_killed"] = kill_leftovers(str(d.tmp))


def fmt(s: dict[str, Any]) -> str:
    f = lambda x: "-" if x is None else (f"{x * 1000:.2f} ms" if x < 0.1 else f"{x:.3f} s")  # noqa: E731
    return f"n={s['n']:<3} p50={f(s['p50'])}  p95={f(s['p95'])}  max={f(s['max'])}"


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seed-runs", type=int, default=3, help="how many of the crash runs also run the polling loop")
    ap.add_argument("--stale-runs", type=int, default=5)
    ap.add_argument("--time-scale", type=float, default=0.2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "lifecycle_latency.json"))
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bringup-bench-lat-"))
    t_begin = time.time()
    crashes: list[dict[str, Any]] = []
    stales: list[dict[str, Any]] = []
    try:
        for i in range(a.runs):
            r = await crash_run(i, base, a.time_scale, with_poll=i < a.seed_runs)
            crashes.append(r)
            print(f"crash run {i}: failure {r.get('failure_latency_s')} ready {r.get('ready_latency_s')} "
                  f"hand-written {r.get('poll_latency_s')} {r.get('error', '')}", flush=True)
        for i in range(a.stale_runs):
            r = await stale_run(i, base, a.time_scale)
            stales.append(r)
            print(f"stale run {i}: rc {r.get('restart_rc')} ready {r.get('ready_latency_s')} false "
                  f"{r.get('false_readies_new_invocation')} early {r.get('readies_before_new_ready_line')} "
                  f"{r.get('error', '')}", flush=True)
    finally:
        left = kill_leftovers(str(base))
        still = leftovers(str(base))
        shutil.rmtree(base, ignore_errors=True)
    fail = [r["failure_latency_s"] for r in crashes if r.get("failure_latency_s") is not None]
    ready = [r["ready_latency_s"] for r in crashes if r.get("ready_latency_s") is not None]
    ready_restart = [r["ready_latency_s"] for r in stales if r.get("ready_latency_s") is not None]
    polled = [r["poll_latency_s"] for r in crashes if r.get("poll_latency_s") is not None]
    res = {
        "what": "failure/ready detection latency of bringup's engine (tui.engine.Engine, default probe settings) vs "
                "a hand-written 15 s polling loop, on the simulated SGLang server (process manager)",
        "command": "python benchmarks/lifecycle_latency.py " + " ".join(sys.argv[1:]),
        "machine": machine(), "time_scale": a.time_scale, "poll_period_s": SEED_PERIOD,
        "n_crash_runs": a.runs, "n_seed_runs": a.seed_runs, "n_stale_runs": a.stale_runs,
        "failure_detection_s": {"bringup": summary(fail), "polling_loop": summary(polled)},
        "ready_detection_s": {"bringup_start": summary(ready), "bringup_stale_health_restart": summary(ready_restart)},
        "stale_health": {
            "false_readies_new_invocation": sum(r.get("false_readies_new_invocation", 0) for r in stales),
            "readies_before_new_ready_line": sum(r.get("readies_before_new_ready_line", 0) for r in stales),
            "restart_ok": sum(1 for r in stales if r.get("restart_rc") == 0), "runs": len(stales),
            "v1_models_answered_by_old_process_during_restart": sum(
                r.get("models_answers_before_new_process", 0) for r in stales),
            "runs_where_a_v1_models_check_would_have_said_ready_too_early": sum(
                1 for r in stales if r.get("models_answers_before_new_process", 0) > 0)},
        "errors": [r["error"] for r in crashes + stales if r.get("error")],
        "leftover_pids_killed_at_end": left, "leftover_pids_after_cleanup": still,
        "wall_s": time.time() - t_begin,
        "crash_runs": crashes, "stale_runs": stales,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(portable(json.dumps(res, indent=2, default=str)) + "\n", encoding="utf-8")
    print(f"\nlifecycle latency, time-scale {a.time_scale}, {machine()['platform']}, {machine()['cores']} cores")
    print(f"{'failure detection, bringup':<42} {fmt(summary(fail))}")
    print(f"{'failure detection, hand-written 15 s loop':<42} {fmt(summary(polled))}")
    print(f"{'ready detection, bringup (start)':<42} {fmt(summary(ready))}")
    print(f"{'ready detection, bringup (stale restart)':<42} {fmt(summary(ready_restart))}")
    sh = res["stale_health"]
    print(f"stale-health restarts: {sh['restart_ok']}/{sh['runs']} ok, false readies (new invocation) "
          f"{sh['false_readies_new_invocation']}, readies before the new ready line {sh['readies_before_new_ready_line']}")
    print(f"  meanwhile GET /v1/models (every 50 ms) was answered with an id by the OLD process "
          f"{sh['v1_models_answered_by_old_process_during_restart']} times, in "
          f"{sh['runs_where_a_v1_models_check_would_have_said_ready_too_early']}/{sh['runs']} restarts (after its SIGTERM)")
    print(f"errors: {len(res['errors'])}, leftover processes after cleanup: {still}, wall {res['wall_s']:.0f} s")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
