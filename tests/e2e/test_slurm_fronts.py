"""bringup's fronts on a Slurm deployment of the real test cluster (.ci/slurm.sh), as on any other deployment:
`status --all` and its row's words, `wait`, the exporter's series (queued included), the run history and
`bringup record` of a job Slurm ended at its time limit, and a sweep of two configurations, each its own job. The
manager's own cases are tests/e2e/test_slurm_manager.py; the console's, tests/e2e/test_slurm_console.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import wait
from tests.helpers.exposition import Samples, current_phase, parse, value
from tests.helpers.ports import free_port
from tests.helpers.slurm_cluster import SlurmCluster
from tests.helpers.slurm_deploy import Deployment, deployment
from tests.helpers.wait import until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster, left idle again whatever the test did (its slurmd running, every job cancelled)."""
    yield slurm_cluster
    slurm_cluster.reset()


@contextmanager
def exporter(dep: Deployment) -> Iterator[str]:
    """`bringup exporter` of the deployment on a free loopback port; yields the /metrics URL once it answers."""
    port = free_port()
    p = dep.popen("exporter", "--listen", f"127.0.0.1:{port}", dep.name)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait.until("the exporter to answer", lambda: httpx.get(url, timeout=2).status_code == 200, 60,
                   retry_on=(httpx.HTTPError, OSError))
        yield url
    finally:
        p.terminate()
        out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, out


def scrape(url: str) -> Samples:
    return parse(httpx.get(url, timeout=5).text)[1]


def row(dep: Deployment, *args: str) -> tuple[int, str, dict[str, Any]]:
    """`status --all`: its exit code, the deployment's text row, and its JSON row."""
    text = dep.bringup("status", "--all", *args, timeout=90)
    line = next((ln for ln in text.stdout.splitlines() if ln.startswith(dep.name)), "")
    js = dep.bringup("status", "--all", "--json", timeout=90)
    rows = {d["deployment"]: d for d in json.loads(js.stdout)["deployments"]}
    return text.returncode, line, rows[dep.name]


def test_status_all_wait_and_the_exporter_follow_a_queued_job_to_ready(tmp_path: Path,
                                                                       cluster: SlurmCluster) -> None:
    blockers = {n: cluster.submit_blocker(node=n) for n in ("n1", "n2")}  # every GPU of the partition held
    dep = deployment(tmp_path, cluster)
    why = "queued: Resources (the nodes or GPUs it asks for are held by other jobs)"
    with exporter(dep) as url:
        r = dep.bringup("start", dep.name, "--no-wait")
        assert r.returncode == 0 and "submitted job" in r.stdout, r.stdout + r.stderr
        job = dep.job_id(cluster)
        s = until("the exporter saying queued", lambda: (x := scrape(url)) and
                  current_phase(x, dep.name) == "queued" and x, timeout=60, every=1.0)
        assert value(s, "bringup_ready", deployment=dep.name) == 0
        assert value(s, "bringup_up", deployment=dep.name) == 1

        code, line, js = row(dep)
        assert code == 0 and js["phase"] == "queued" and js["invocation"] == str(job), js
        assert line.split()[2] == "queued" and why in line, line  # the row says why it waits, in Slurm's words

        w = dep.bringup("wait", dep.name, "--timeout", "3")
        assert w.returncode == 3, w.stdout + w.stderr  # still in the queue: a timeout, not a failure
        assert "queued" in w.stdout and "Resources" in w.stdout, w.stdout

        waiting = dep.popen("wait", dep.name, "--timeout", "240")
        assert waiting.stdout is not None
        seen = [waiting.stdout.readline() for _ in range(1)]
        while "queued" not in seen[-1] and seen[-1] and len(seen) < 20:  # the wait has seen the job queued
            seen.append(waiting.stdout.readline())
        cluster.ctl("scancel", str(blockers["n2"]))  # n2's GPUs freed: the job starts there
        rest, _ = waiting.communicate(timeout=260)
        out = "".join(seen) + rest
        assert waiting.returncode == 0, out
        phases = [ln.split("]", 1)[1].split()[0] for ln in out.splitlines() if ln.startswith("[")]
        assert phases[0] == "queued" and phases[1] == "starting" and phases[-1] == "ready", out
        assert "running on n2" in out, out  # the node it started on

        s = until("the exporter saying ready", lambda: (x := scrape(url)) and
                  current_phase(x, dep.name) == "ready" and x, timeout=60, every=1.0)
        assert value(s, "bringup_ready", deployment=dep.name) == 1
        info = [dict(k[1]) for k in s if k[0] == "bringup_info" and dict(k[1])["deployment"] == dep.name]
        assert len(info) == 1 and info[0]["invocation"] == str(job), info
        mem = until("this run's GPU memory in the exporter", lambda: [
            v for k, v in scrape(url).items() if k[0] == "bringup_gpu_memory_bytes" and
            dict(k[1])["owner"] == "this_run" and v > 0], timeout=60, every=1.0)
        assert len(mem) >= 4, mem  # the sim's GPUs on n2, read through the allocation

    code, line, js = row(dep)
    assert code == 0 and js["phase"] == "ready" and js["invocation"] == str(job), js
    assert line.split()[2] == "ready" and "queued" not in line, line
    assert {g["host"] for g in js["gpus"]["gpus"] if g["mem_used_mib"]} == {"n2"}, js["gpus"]  # its node's GPUs
    assert cluster.job(job).nodes == "n2"
    r = dep.bringup("stop", dep.name, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_time_limit_in_the_run_history_and_its_record(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster, time_limit="1")
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    job = dep.job_id(cluster)
    cluster.wait_job(job, "TIMEOUT", timeout=180)
    st = until("bringup saying the time limit ended it", lambda: (s := dep.status())["phase"] == "failed" and s,
               timeout=60, every=1.0)
    assert st["failure"]["kind"] == "time-limit", st["failure"]

    code, line, js = row(dep)
    assert code == 1 and js["phase"] == "failed" and "time-limit" in line.split(), line

    out = tmp_path / "record.md"
    rec = dep.bringup("record", dep.name, "--out", str(out))
    assert rec.returncode == 0, rec.stdout + rec.stderr
    md = out.read_text()
    assert str(job) in md and "time-limit" in md, md
    assert f"Slurm ended job {job} at its time limit" in md, md
    # the run history (the operator's, on this side): the job's record, its timeline to ready and Slurm's ending
    runs = json.loads((tmp_path / "state" / "deployments" / dep.name / "history.json").read_text())["runs"]
    run = next(r for r in runs if r["invocation"] == str(job))
    assert run["outcome"] == "failed" and run["failure"]["kind"] == "time-limit", run
    assert "ready" in [t["phase"] for t in run["timeline"]], run["timeline"]
    assert any(f"Slurm ended job {job} at its time limit" in x for x in run["failure"]["excerpt"]), run["failure"]


def test_a_sweep_of_two_configurations_each_its_own_job(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster)
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    first = dep.job_id(cluster)
    plan = tmp_path / "plan.toml"
    plan.write_text('[[configs]]\nname = "base"\n[[configs]]\nname = "mem"\nset = { mem-fraction-static = 0.8 }\n'
                    '[matrix]\nprompt_tokens = [16]\noutput_tokens = [8]\nconcurrency = [1]\nrequests = 1\n'
                    'warmup_requests = 1\n')
    results = tmp_path / "results"
    r = dep.bringup("sweep", dep.name, str(plan), "--out", str(results), "--yes", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sweep done: 2 valid cells, 0 invalid, 0 configurations failed" in r.stdout, r.stdout
    records = [json.loads(ln) for ln in (results / "records.jsonl").read_text().splitlines() if ln.strip()]
    runs = {rec["config"]: rec["invocation"] for rec in records if rec["type"] == "config"}
    assert set(runs) >= {"base", "mem"}, records
    assert len({runs["base"], runs["mem"]}) == 2 and all(str(v).isdigit() for v in runs.values()), runs
    for config, inv in runs.items():
        assert cluster.job(int(inv)).state in ("CANCELLED", "RUNNING"), (config, inv)
    assert int(runs["mem"]) > first
    after = dep.job_id(cluster)
    assert cluster.job(after).state == "RUNNING"  # the original flags restored: the deployment's last job
    r = dep.bringup("stop", dep.name, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr


def test_queue_timeout_s_gives_up_a_start_still_queued_and_leaves_the_job_queued(tmp_path: Path,
                                                                                   cluster: SlurmCluster) -> None:
    """ready_timeout_s counts from the job's start (tests/unit/test_queue_timeout.py); `queue_timeout_s` bounds the
    queue: the start gives up with Slurm's reason, and the job waits on until stopped."""
    for n in ("n1", "n2"):
        cluster.submit_blocker(node=n)
    dep = deployment(tmp_path, cluster)
    dep.config.write_text(dep.config.read_text().replace("ready_timeout_s = 180", "ready_timeout_s = 1\n"
                                                         "queue_timeout_s = 5"))
    r = dep.bringup("start", dep.name)
    assert r.returncode == 3, r.stdout + r.stderr
    said = r.stdout + r.stderr
    assert "still queued after 5 s (the deployment's queue_timeout_s): queued: Resources" in said, said
    assert f"`bringup stop {dep.name}` cancels it" in said, said
    job = dep.job_id(cluster)
    assert cluster.job(job).state == "PENDING"  # still waiting in the queue, as said
    r = dep.bringup("stop", dep.name, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert cluster.job(job).state == "CANCELLED"
