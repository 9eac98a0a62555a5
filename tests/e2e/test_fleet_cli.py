"""`bringup status --all` and `bringup wait A B` on real simulated deployments and a host that is down: every row
answers, the down host costs only its own row, and a multi-deployment wait ends 0 only when all are ready."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host, two_on_one_box
from tests.helpers.wait import slack
from tui.config.settings import ProbeConfig

pytestmark = pytest.mark.slow


def bringup(cfg: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True, text=True,
                          timeout=slack(timeout), env=env, cwd=cfg.parent, stdin=subprocess.DEVNULL)


def test_status_all_and_waiting_for_several(tmp_path: Path) -> None:
    cfg = two_on_one_box(tmp_path)
    try:
        st = bringup(cfg, "status", "--all", "--json")
        # exits as `status far` would: its host is down, so 1 (the two readable ones are merely stopped)
        assert st.returncode == 1, st.stderr
        assert bringup(cfg, "status", "far").returncode == 1
        rows = {d["deployment"]: d for d in json.loads(st.stdout)["deployments"]}
        assert set(rows) == {"sim-a", "sim-b", "far"}
        assert rows["sim-a"]["phase"] == rows["sim-b"]["phase"] == "stopped"
        assert "host down" in rows["far"]["note"] or "refused" in rows["far"]["note"], rows["far"]
        text = bringup(cfg, "status", "--all")
        head = [ln for ln in text.stdout.splitlines() if ln.startswith("DEPLOYMENT")]
        assert text.returncode == 1 and head, text.stdout
        assert bringup(cfg, "status", "sim-a", "--all").returncode == 2  # a deployment or --all

        for name in ("sim-a", "sim-b"):
            r = bringup(cfg, "start", name, "--no-wait")
            assert r.returncode == 0, r.stderr
        w = bringup(cfg, "wait", "sim-a", "sim-b", "--timeout", "60")
        assert w.returncode == 0, w.stdout + w.stderr
        assert "ready" in w.stdout
        st = bringup(cfg, "status", "--all", "--json")
        rows = {d["deployment"]: d for d in json.loads(st.stdout)["deployments"]}
        assert rows["sim-a"]["phase"] == rows["sim-b"]["phase"] == "ready", st.stdout
        # one of them stopped: waiting for both ends at once with "stopped" (4), not at the timeout
        assert bringup(cfg, "stop", "sim-b").returncode == 0
        w = bringup(cfg, "wait", "sim-a", "sim-b", "--timeout", "60")
        assert w.returncode == 4, w.stdout + w.stderr
    finally:
        for name in ("sim-a", "sim-b"):
            bringup(cfg, "stop", name)


def test_waiting_for_several_names_the_one_that_failed(tmp_path: Path) -> None:
    """One of two fails (DFLASH with CUDA graphs): the wait ends 1 at once, and every line says whose it is."""
    deps = {}
    for name, gpus, extra in (("good", [0, 1, 2, 3], []), ("bad", [4, 5, 6, 7], ["--scenario", "dflash-graph-crash"])):
        port = free_port()
        cmd = sim_command(port, tmp_path / "simgpu")
        cmd[cmd.index("--tp-size") + 1] = "4"
        deps[name] = process_deployment([*cmd, "--sim-gpu-ids", ",".join(map(str, gpus)), *extra], port,
                                        stop_timeout_s=20).model_copy(update={"gpus": gpus})
    cfg = ConfigFile(state_dir=tmp_path / "state", probe=ProbeConfig.model_validate({"interval_s": 0.3}),
                     hosts={"simhost": sim_host(tmp_path / "simgpu")}, deployments=deps).write(tmp_path / "config.toml")
    try:
        for name in deps:
            r = bringup(cfg, "start", name, "--no-wait")
            assert r.returncode == 0, r.stderr
        w = bringup(cfg, "wait", "good", "bad", "--timeout", "90", "--json")
        assert w.returncode == 1, w.stdout + w.stderr
        records = [json.loads(line) for line in w.stdout.splitlines()]
        assert all(r.get("deployment") in ("good", "bad") for r in records[:-1]), records
        failures = [r for r in records if "failure" in r]
        assert [r["deployment"] for r in failures] == ["bad"], records
        assert failures[0]["failure"]["kind"] == "cuda-graph", failures
        last = records[-1]
        assert last["result"] == "failed" and last["ended_by"] == "bad", last
        assert set(last["deployments"]) == {"good", "bad"} and last["deployments"]["bad"] == "failed", last
        # in text, the failure says whose it is, and so does the line that ends the wait
        t = bringup(cfg, "wait", "good", "bad", "--timeout", "90")
        assert t.returncode == 1, t.stdout + t.stderr
        assert "bad FAILED in" in t.stderr and "bad failed; the wait ended there" in t.stderr, t.stderr
        phase_lines = [ln for ln in t.stdout.splitlines() if ln.startswith("[")]
        assert phase_lines and all(re.match(r"\[\d\d:\d\d:\d\d\] (good|bad): ", ln) for ln in phase_lines), t.stdout
    finally:
        for name in deps:
            bringup(cfg, "stop", name)
