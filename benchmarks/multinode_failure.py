"""A worker node's crash in a deployment over two nodes: how soon bringup says `failed`, next to what the head
alone shows (its watchdog) and the polling loop people write against the head, on two systemd test hosts (real
OpenSSH, systemd and journald in two containers booted by .ci/testhost.sh, the second with TESTHOST_DIR).

    bash .ci/run   # or by hand, as root: .ci/testhost.sh build/up/install-sim, and again with
                   # TESTHOST_DIR=.testhost-b TESTHOST_NAME=bringup-testhost-b TESTHOST_SSH_PORT=2223 TESTHOST_SIM_PORT=30002
    .venv/bin/python benchmarks/multinode_failure.py [--runs 5]

Each run: `bringup start mn` brings both nodes up (the simulated SGLang server, TP 8 over `--nnodes 2`); an Engine
in this process follows both journals over SSH. The worker dies of an NCCL error 3 s after its bring-up
(`--sim-crash-after`). bringup's latency: the time its Engine reports failed minus the journal time of the
worker's fatal line. The head alone: the journal time of the head's own first fatal line (its watchdog, after
`--watchdog-timeout` x the time scale: 100 s x 0.1 here; SGLang's default is 300 s) minus the same. The polling
loop (`systemctl is-active && GET /v1/models` on the head, every 15 s): the head keeps answering `/v1/models`
while it hangs, so the loop says "up" until the watchdog has killed the head. Writes
benchmarks/results/multinode_failure.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _simbench import machine, summary  # noqa: E402

from tests.helpers.multinode_hosts import UNIT, hosts_up, node_config, reset, th  # noqa: E402
from tui.config.settings import load  # noqa: E402
from tui.engine import Engine  # noqa: E402
from tui.model import Phase  # noqa: E402

WATCHDOG_S, SCALE = 100.0, 0.1


def journal_time(second: bool, needle: str) -> float | None:
    """The receive time of the first line of the unit's current run that contains `needle`."""
    inv = th(second, "exec", "systemctl", "show", "-p", "InvocationID", "--value", UNIT).strip()
    for raw in th(second, "exec", "journalctl", f"_SYSTEMD_INVOCATION_ID={inv}", "-o", "json",
                  "--no-pager").splitlines():
        e = json.loads(raw)
        msg = e.get("MESSAGE")
        if isinstance(msg, list):
            msg = bytes(msg).decode("utf-8", "replace")
        if needle in str(msg):
            return int(e["__REALTIME_TIMESTAMP"]) / 1e6
    return None


def models_answer(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


async def one_run(tmp: Path) -> dict[str, Any]:
    cfg = node_config(tmp, worker=("--sim-crash-after", "30"), head=("--watchdog-timeout", f"{WATCHDOG_S:g}"))
    settings = load(str(cfg))
    port = int(settings.deployments["mn"].endpoint.rsplit(":", 1)[1])
    r = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "tui", "--config", str(cfg), "start", "mn", "--no-wait"],
                                capture_output=True, text=True, timeout=180)
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    engine = Engine(settings, "mn", settings.deployments["mn"])
    failed_at: float | None = None
    await engine.start()
    try:
        t0 = time.monotonic()
        while engine.state.phase != Phase.FAILED and time.monotonic() - t0 < 60:
            await engine.wait_changed(0.1)
        failed_at = time.time() if engine.state.phase == Phase.FAILED else None
        head_answers = models_answer(port)  # the head hangs, yet answers /v1/models: a polling loop says "up"
        await engine.settle_failure()  # the kind once the traceback is in (the first line alone says less)
        kind = str(engine.state.failure.kind) if engine.state.failure else None
    finally:
        await engine.close()
    fatal = await asyncio.to_thread(journal_time, True, "Scheduler hit an exception")
    deadline = time.monotonic() + WATCHDOG_S * SCALE + 30
    head_fatal = None
    while head_fatal is None and time.monotonic() < deadline:
        head_fatal = await asyncio.to_thread(journal_time, False, "watchdog timeout")
        if head_fatal is None:
            await asyncio.sleep(1.0)
    for second in (False, True):
        reset(second)
    return {"bringup_s": None if failed_at is None or fatal is None else failed_at - fatal,
            "head_watchdog_s": None if head_fatal is None or fatal is None else head_fatal - fatal,
            "head_answered_models_while_hung": head_answers, "kind": kind}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if not hosts_up():
        sys.exit("two test hosts are needed: see the docstring")
    runs = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            runs.append(asyncio.run(one_run(Path(d))))
        print(f"run {i + 1}: {runs[-1]}", flush=True)
    ok = [r["bringup_s"] for r in runs if r["bringup_s"] is not None]
    wd = [r["head_watchdog_s"] for r in runs if r["head_watchdog_s"] is not None]
    out = {"machine": machine(), "what": "worker-node crash -> failed, two systemd test hosts over SSH",
           "watchdog_timeout_s": WATCHDOG_S, "time_scale": SCALE, "runs": runs,
           "bringup_s": summary(ok), "head_alone_s": summary(wd),
           "polling_loop": "the head answers /v1/models while it hangs: a 15 s loop says 'up' until the watchdog "
                           "(300 s by default) kills the head, then up to 15 s more"}
    path = ROOT / "benchmarks" / "results" / "multinode_failure.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("bringup_s", "head_alone_s")}, indent=1))


if __name__ == "__main__":
    main()
