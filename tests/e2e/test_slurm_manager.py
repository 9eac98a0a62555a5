"""`manager = "slurm"` on a real cluster (.ci/slurm.sh: Debian's slurm-wlm 22.05, slurmctld on the login host,
slurmd on n1 and n2 with 4 GPUs each as GRES), driven through bringup's CLI as an operator would: bringup reaches the
cluster only through the login host's sshd, as user `tester`, and the job is the simulated SGLang server run on the
nodes (/opt/bringup-sim), its GPUs the simulator's (read through the allocation with `srun --overlap`).

Each test sets its scene behind bringup's back as a cluster's other users would (a blocker job holding the GPUs,
an administrator's scancel, a node's slurmd stopped) and reads what bringup says of it: its phases and failure,
the job on the cluster, the nodes it ran on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.ports import free_port
from tests.helpers.slurm_cluster import SlurmCluster
from tests.helpers.slurm_deploy import SIM_GPUS, deployment, toml_value
from tests.helpers.wait import until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster, left idle again whatever the test did (its slurmd running, every job cancelled)."""
    yield slurm_cluster
    slurm_cluster.reset()


def test_queued_behind_a_blocker_then_up_when_the_gpus_are_freed(tmp_path: Path, cluster: SlurmCluster) -> None:
    blockers = [cluster.submit_blocker(node=n) for n in ("n1", "n2")]  # every GPU of the partition held
    dep = deployment(tmp_path, cluster)
    start = dep.popen("start", dep.name)
    try:
        why = "queued: Resources (the nodes or GPUs it asks for are held by other jobs)"
        st = until("the job queued, bringup saying why", lambda: (s := dep.status())["phase"] == "queued" and
                   s["timeline"][-1]["line"].startswith(why) and s, timeout=90, every=1.0)
        assert [t["phase"] for t in st["timeline"]] == ["queued"], st
        assert st["eta"] is not None, st  # the queue has its ETA line (or why none) like any phase
        job = dep.job_id(cluster)
        assert cluster.job(job).state == "PENDING" and cluster.job(job).reason == "Resources"
        cluster.ctl("scancel", str(blockers[1]))
        out, _ = start.communicate(timeout=180)
    finally:
        if start.poll() is None:
            start.kill()
    assert start.returncode == 0, out
    assert "follow   queued" in out and "ready: a generation from the new process succeeded" in out, out
    assert out.index("follow   queued") < out.index("follow   starting") < out.index("follow   ready"), out
    st = dep.status()
    assert st["phase"] == "ready", st
    assert cluster.job(job).nodes == "n2"  # where the freed GPUs were


def test_one_node_to_ready_read_through_the_allocation_then_stopped(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster)
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "submitted job" in r.stdout and "ready: a generation from the new process succeeded" in r.stdout
    job = dep.job_id(cluster)
    node = cluster.job(job).nodes
    assert cluster.job(job).state == "RUNNING" and node in ("n1", "n2")
    st = dep.status()
    assert st["phase"] == "ready" and st["invocation"] == str(job), st
    gpus = [g for g in st["gpus"]["gpus"] if g["mem_used_mib"]]
    # the sim's four GPUs on that node, with the server's memory, read by nvidia-smi through `srun --overlap`
    assert {g["host"] for g in gpus} == {node} and len(gpus) >= 4 and all(g["mem_used_mib"] > 1000 for g in gpus)
    # the job's processes (`scontrol listpids` on its node, through the allocation) hold that memory: this run's
    assert st["attribution"]["current_mib"] > 4000 and st["attribution"]["other_mib"] == 0, st["attribution"]
    log = (dep.output / f"job-{job}.{node}.log").read_text()
    assert "The server is fired up and ready to roll!" in log

    r = dep.bringup("stop", dep.name, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert cluster.job(job).state == "CANCELLED"  # stopped means ended on its node: not COMPLETING any more
    st = dep.status()
    assert st["phase"] == "stopped" and st["failure"] is None, st  # bringup's own cancel: a stop, not a failure


def test_two_nodes_each_with_its_rank(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster, nodes=2)
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    job = dep.job_id(cluster)
    assert cluster.job(job).nodes == "n[1-2]"
    for rank, node in enumerate(("n1", "n2")):
        log = (dep.output / f"job-{job}.{node}.log").read_text()
        assert f"'node_rank': {rank}" in log or f"node_rank={rank}" in log, log[:2000]
    st = dep.status()
    assert st["phase"] == "ready", st
    hosts = {g["host"] for g in st["gpus"]["gpus"] if g["mem_used_mib"]}
    assert hosts == {"n1", "n2"}, st["gpus"]


def test_a_bad_flag_fails_with_the_servers_refusal_as_the_cause(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster, extra=("--no-such-flag",))
    r = dep.bringup("start", dep.name)
    assert r.returncode != 0, r.stdout
    st = dep.status()
    assert st["phase"] == "failed", st
    f = st["failure"]
    assert f["kind"] == "bad-args" and "--no-such-flag" in f["hint"], f
    assert "unrecognized arguments: --no-such-flag" in f["excerpt"], f
    assert cluster.job(dep.job_id(cluster)).state == "FAILED"


def test_the_time_limit_reached_is_the_failure(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster, time_limit="1")
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    job = dep.job_id(cluster)
    cluster.wait_job(job, "TIMEOUT", timeout=180)
    st = until("bringup saying the time limit ended it", lambda: (s := dep.status())["phase"] == "failed" and s,
               timeout=60, every=1.0)
    f = st["failure"]
    assert f["kind"] == "time-limit" and f["phase"] == "ready", f
    assert f"Slurm ended job {job} at its time limit" in f["excerpt"] and "SIGTERM received" in f["excerpt"], f
    assert "time" in f["hint"], f


def test_a_node_lost_mid_run_fails_it_with_the_node_named(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster)
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    job = dep.job_id(cluster)
    node = cluster.job(job).nodes
    cluster.stop_slurmd(node)
    cluster.wait_job(job, "NODE_FAIL", timeout=180)
    st = until("bringup saying the node failed", lambda: (s := dep.status())["phase"] == "failed" and s,
               timeout=60, every=1.0)
    f = st["failure"]
    assert f["kind"] == "node-fail", f
    assert f"Slurm ended job {job}: its node {node} failed (NODE_FAIL)" in f["excerpt"], f


def test_cancelled_by_another_user(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster)
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    job = dep.job_id(cluster)
    refused = cluster.run_ctl("scancel", str(job), user="tester2")
    assert cluster.job(job).state == "RUNNING", refused  # another user may not
    cluster.ctl("scancel", str(job))  # root, an administrator, may
    st = until("bringup saying someone else cancelled it", lambda: (s := dep.status())["phase"] == "failed" and s,
               timeout=60, every=1.0)
    f = st["failure"]
    assert f["kind"] == "cancelled" and f["phase"] == "ready", f
    # no accounting here: slurmctld's log on the login host names the administrator, tester2's refused try aside
    assert f"job {job} was cancelled by root (uid 0, as slurmctld's log says) (CANCELLED)" in f["excerpt"], f
    assert "SIGTERM received" in f["excerpt"], f  # the server's own last lines beside Slurm's word


def test_a_restart_lands_on_the_other_node_and_is_followed_there(tmp_path: Path, cluster: SlurmCluster) -> None:
    dep = deployment(tmp_path, cluster)
    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    old = dep.job_id(cluster)
    first = cluster.job(old).nodes
    other = "n2" if first == "n1" else "n1"
    # a job ahead in the queue for the first node's GPUs: once the restart frees them, it takes them
    cluster.submit_blocker(node=first, wait_running=False)
    r = dep.bringup("restart", dep.name, "--set", "mem-fraction-static=0.8", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.index(f"scancel {old}") < out.index("(no COMPLETING)") < out.index("submitted job"), out
    new = dep.job_id(cluster)
    assert new != old and cluster.job(new).nodes == other and cluster.job(old).state == "CANCELLED"
    st = dep.status()
    assert st["phase"] == "ready" and st["invocation"] == str(new), st
    assert "--mem-fraction-static 0.8" in " ".join(st["argv"]), st["argv"]
    assert {g["host"] for g in st["gpus"]["gpus"] if g["mem_used_mib"]} == {other}, st["gpus"]


def test_the_lock_refuses_a_second_operator(tmp_path: Path, cluster: SlurmCluster) -> None:
    """Two operators of one cluster account (two machines: each its own bringup state): while one's start waits in
    the queue under the lock, the other's restart is refused, naming who holds it."""
    cluster.submit_blocker(node="n1")
    cluster.submit_blocker(node="n2")
    dep = deployment(tmp_path, cluster)
    other = deployment(tmp_path, cluster, name=dep.name, state="other")
    first = dep.popen("start", dep.name)
    try:
        until("the first operator's job queued", lambda: dep.status()["phase"] == "queued", timeout=90, every=1.0)
        r = other.bringup("restart", dep.name, "--yes", user_state=other.config)
        assert r.returncode != 0, r.stdout
        assert "another bringup is already" in r.stdout + r.stderr and "start" in r.stdout + r.stderr, r.stdout
    finally:
        first.kill()
        first.communicate(timeout=30)


def test_an_operators_own_batch_script_its_server_line_edited_in_a_copy(tmp_path: Path,
                                                                       cluster: SlurmCluster) -> None:
    """`batch_script`: the operator's script on the login host, its marked srun line read as the flags; a restart
    with a new flag submits a copy with that line edited, every other word as written, the script untouched."""
    dep = deployment(tmp_path, cluster)
    port = free_port()
    here, there = cluster.shared(f"bringup-e2e-script-{dep.name}")
    script = ("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:4\n"
              'SIM="--sim-state-dir ' + SIM_GPUS + '"\n'
              "# bringup: server\n"
              "srun python3 -u /opt/bringup-sim/server.py --model-path 'moonshotai/Kimi-K2.6' --tp-size 4 \\\n"
              f"    --host 127.0.0.1 --port {port} $SIM --time-scale 0.05 --sim-release-delay 0\n")
    (here / "serve.sbatch").write_text(script)
    cfg = dep.config.read_text().split("\n")
    cfg = [ln for ln in cfg if not ln.startswith(("command = ", "endpoint = ", "node_count", "gpus_per_node"))]
    cfg += [f'endpoint = "http://{{head}}:{port}"', f"batch_script = {toml_value(there + '/serve.sbatch')}"]
    dep.config.write_text("\n".join(cfg) + "\n")

    r = dep.bringup("start", dep.name)
    assert r.returncode == 0, r.stdout + r.stderr
    r = dep.bringup("restart", dep.name, "--set", "mem-fraction-static=0.8", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    job = dep.job_id(cluster)
    sent = cluster.ctl("scontrol", "write", "batch_script", str(job), "-", user="tester")
    line = next(x for x in sent.split("\n") if x.startswith("srun"))
    assert line == (f"srun python3 -u /opt/bringup-sim/server.py --model-path 'moonshotai/Kimi-K2.6' --tp-size 4 "
                    f"--host 127.0.0.1 --port {port} $SIM --time-scale 0.05 --sim-release-delay 0 "
                    "--mem-fraction-static 0.8"), sent
    assert (here / "serve.sbatch").read_text() == script  # the operator's own, never written
    st = dep.status()
    assert st["phase"] == "ready" and st["invocation"] == str(job), st
