"""Failure detection over SSH: from the crash's fatal line reaching the host's journal to bringup reporting
`failed`, on the systemd test host (real OpenSSH, systemd and journald in a container booted by .ci/testhost.sh);
side by side with the polling loop people write, run over the same SSH on the same crashes.

    bash .ci/testhost.sh build && bash .ci/testhost.sh up && bash .ci/testhost.sh install-sim tui/sim   # as root
    .venv/bin/python benchmarks/remote_failure_latency.py [--runs 10] [--poll-runs 3]

Each run: a `tui.engine.Engine` on the remote deployment is started in this process (it follows `journalctl -u UNIT
-o json -f` and `systemctl show` over one SSH connection); then `bringup restart remote --set
scenario=crash-while-serving --yes --no-wait` starts the simulated server, which crashes ~1 s after ready
(`Subprocess scheduler_3 (pid=...) crashed with exit code -9`). Latency = the time the Engine reports failed
(time.time() in its listener) minus the journal's receive time of the fatal line (__REALTIME_TIMESTAMP; the
container shares this machine's clock). The polling loop, on the first `--poll-runs` runs: every 15 s (first check
at a random phase), `ssh HOST 'systemctl is-active --quiet UNIT && GET /v1/models'`; its latency is the end of the
first failing check that started after the fatal line. Writes benchmarks/results/remote_failure_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _simbench import machine, portable, summary  # noqa: E402

from tests.helpers.config_toml import ConfigFile  # noqa: E402
from tests.helpers.simdeploy import ALL_GPUS, UNIT, hosts_on_testhost, sim_port_on_testhost, systemd_deployment  # noqa: E402
from tui.config.parts import FlagConfig  # noqa: E402
from tui.config.settings import load  # noqa: E402
from tui.engine import Engine, PhaseChanged  # noqa: E402
from tui.model import Phase  # noqa: E402

SCRIPT = ROOT / ".ci" / "testhost.sh"
PORT = sim_port_on_testhost()
FATAL = "crashed with exit code"
PERIOD = 15.0
CHECK = (f"systemctl is-active --quiet {UNIT} && python3 -c \"import urllib.request as u; "
         f"u.urlopen('http://127.0.0.1:{PORT}/v1/models', timeout=5).read()\"")


def texec(*argv: str) -> str:
    return subprocess.run(["bash", str(SCRIPT), "exec", *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=60).stdout


def reset_unit() -> None:
    texec("sh", "-c", f"systemctl stop {UNIT}; rm -rf /etc/systemd/system/{UNIT}.d; systemctl daemon-reload; "
          f"systemctl reset-failed {UNIT} 2>/dev/null; rm -rf /var/lib/bringup-sim/holders; rm -f /run/lock/bringup-*")


def fatal_line_at(since: float) -> float | None:
    """The journal's receive time of the newest fatal line written after `since`."""
    out = texec("journalctl", "-u", UNIT, "-o", "json", "--since", f"@{int(since) - 1}", "--no-pager")
    best = None
    for raw in out.splitlines():
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        msg = e.get("MESSAGE")
        if isinstance(msg, str) and FATAL in msg:
            t = int(e["__REALTIME_TIMESTAMP"]) / 1e6
            if t >= since and (best is None or t > best):
                best = t
    return best


def polling_loop(ssh: list[str], t0: float, phase: float, stop: threading.Event, checks: list[dict[str, Any]]) -> None:
    k = 0
    while True:
        if stop.wait(max(0.0, t0 + phase + PERIOD * k - time.time())):
            return
        tc = time.time()
        ok = subprocess.run([*ssh, CHECK], capture_output=True, timeout=30).returncode == 0
        checks.append({"start": tc, "end": time.time(), "healthy": ok})
        k += 1


async def run(i: int, cfg: Path, ssh: list[str], poll: bool) -> dict[str, Any]:
    reset_unit()
    settings = load(str(cfg))
    name, dep = settings.deployment("remote")
    w = Engine(settings, name, dep)
    failed: list[tuple[float, str]] = []
    w.subscribe(lambda u: failed.append((time.time(), w.state.invocation))
                if isinstance(u, PhaseChanged) and w.state.phase == Phase.FAILED else None)
    await w.start()
    out: dict[str, Any] = {"run": i}
    stop = threading.Event()
    checks: list[dict[str, Any]] = []
    th = None
    try:
        await asyncio.sleep(1.0)  # the watch is connected and following
        t0 = time.time()
        p = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tui", "--config", str(cfg), "restart", "remote", "--set",
            "scenario=crash-while-serving", "--yes", "--no-wait", cwd=str(cfg.parent),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await p.communicate()
        if p.returncode != 0:
            out["error"] = f"restart rc={p.returncode}: {err.decode()[-300:]}"
            return out
        if poll:
            out["poll_phase_s"] = phase = random.uniform(0, PERIOD)
            th = threading.Thread(target=polling_loop, args=(ssh, t0, phase, stop, checks), daemon=True)
            th.start()
        end = time.monotonic() + 90
        while not failed and time.monotonic() < end:
            await asyncio.sleep(0.05)
        if not failed:
            out["error"] = f"no failed phase (last phase {w.state.phase})"
            return out
        t_failed = failed[0][0]
        t_fatal = await asyncio.to_thread(fatal_line_at, t0)
        if t_fatal is None:
            out["error"] = "no fatal line in the journal"
            return out
        out.update(fatal_line_at=t_fatal, failed_seen_at=t_failed, failure_latency_s=t_failed - t_fatal,
                   failure_kind=str(getattr(w.state.failure, "kind", "")))
        if poll:
            def first_failing() -> dict[str, Any] | None:
                return next((c for c in list(checks) if c["start"] >= t_fatal and not c["healthy"]), None)
            end = time.monotonic() + PERIOD + 30
            while first_failing() is None and time.monotonic() < end:
                await asyncio.sleep(0.2)
            c = first_failing()
            out["poll_checks"] = checks[:]
            out["poll_latency_s"] = (c["end"] - t_fatal) if c else None
        return out
    finally:
        stop.set()
        if th is not None:
            th.join(35)
        await w.close()


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--poll-runs", type=int, default=3)
    a = ap.parse_args()
    st = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True, cwd=ROOT)
    if st.returncode != 0 or "up" not in st.stdout:
        sys.exit("the test host is not up: bash .ci/testhost.sh build && bash .ci/testhost.sh up && "
                 "bash .ci/testhost.sh install-sim tui/sim")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        ssh_config = Path(d) / "ssh_config"
        subprocess.run(["bash", str(SCRIPT), "ssh-config", str(ssh_config)], check=True, cwd=ROOT)
        dep = systemd_deployment(PORT, gpus=ALL_GPUS, release_tolerance_mib=512, release_timeout_s=120,
                                 extra_flags=[FlagConfig(name="scenario", kind="choice",
                                                         choices=["crash-while-serving"])])
        cfg = ConfigFile(state_dir=f"{d}/state", hosts=hosts_on_testhost(ssh_config),
                         deployments={"remote": dep}).write(Path(d) / "bringup.toml")
        ssh = ["ssh", "-F", str(ssh_config), "testhost"]
        env_keep = {k: v for k, v in os.environ.items() if k.startswith("BRINGUP_")}
        for k in env_keep:
            os.environ.pop(k)
        try:
            for i in range(a.runs):
                r = await run(i, cfg, ssh, poll=i < a.poll_runs)
                runs.append(r)
                print(f"run {i}: bringup {r.get('failure_latency_s')} polling {r.get('poll_latency_s')} "
                      f"{r.get('error', '')}", flush=True)
        finally:
            reset_unit()
    fail = [r["failure_latency_s"] for r in runs if r.get("failure_latency_s") is not None]
    polled = [r["poll_latency_s"] for r in runs if r.get("poll_latency_s") is not None]
    res = {
        "what": "failure detection over SSH against a systemd + journald host (nspawn container, OpenSSH): the crash's "
                "fatal line in the journal -> bringup's engine reports failed; vs a 15 s ssh systemctl + /v1/models loop",
        "machine": machine(), "poll_period_s": PERIOD,
        "failure_detection_s": {"bringup": summary(fail), "polling_loop": summary(polled)},
        "errors": [r["error"] for r in runs if r.get("error")],
        "runs": runs,
    }
    out = ROOT / "benchmarks" / "results" / "remote_failure_latency.json"
    out.write_text(portable(json.dumps(res, indent=2, default=str)) + "\n")
    print(json.dumps(res["failure_detection_s"], indent=2))
    print(f"errors: {res['errors']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
