"""The Slurm test cluster (.ci/slurm.sh) is a real one, before any bringup code runs on it: real slurmctld and
slurmd scheduling GRES GPUs over two nodes, queueing what does not fit, launching multi-node steps with ranks,
writing job output to the shared filesystem, enforcing who may cancel a job, and noticing a node whose slurmd is
gone. What `manager = "slurm"` is tested against is only worth as much as these.

Skipped without the cluster, unless BRINGUP_SLURM=required (CI), where its absence fails
(tests/helpers/slurm_cluster.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.helpers.slurm_cluster import BLOCKERS, GPUS_PER_NODE, NODES, Job, SlurmCluster
from tests.helpers.wait import until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The cluster idle before the test, and idle again after it, whatever the test left (jobs, a stopped slurmd)."""
    slurm_cluster.reset()
    yield slurm_cluster
    slurm_cluster.reset()


def _out_dir(cluster: SlurmCluster, request: pytest.FixtureRequest) -> tuple[Path, str]:
    here, there = cluster.shared(f"bringup-tests/{request.node.name}")
    for old in here.iterdir():
        old.unlink()
    return here, there


def _text(path: Path) -> str | None:
    """A job's output file once it has something in it (it appears when the job starts, written by the node)."""
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def test_a_job_per_node_with_four_gpus_then_one_queued_for_resources_until_a_cancel(
        cluster: SlurmCluster, request: pytest.FixtureRequest) -> None:
    here, there = _out_dir(cluster, request)
    # each writes where it runs and which GPUs Slurm gave it, then holds them
    report = 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS"; exec sleep infinity'
    first, second = (cluster.submit("-N1", f"--gres=gpu:{GPUS_PER_NODE}", "-o", f"{there}/%j.out", wrap=report)
                     for _ in range(2))
    running = [cluster.wait_job(j, "RUNNING") for j in (first, second)]
    assert sorted(j.nodes for j in running) == list(NODES), running
    for j in running:
        out = until(f"job {j.id}'s output", partial(_text, here / f"{j.id}.out"), timeout=30)
        assert out == f"{j.nodes} 0,1,2,3 0,1,2,3", out

    # both nodes' GPUs held: a third job waits, and Slurm says why
    third = cluster.submit("-N1", f"--gres=gpu:{GPUS_PER_NODE}", "-o", f"{there}/%j.out", wrap=report)

    def pending_for_resources() -> Job | None:
        j = cluster.job(third)
        return j if (j.state, j.reason) == ("PENDING", "Resources") else None
    queued = until("the third job pending for Resources", pending_for_resources, timeout=30)
    assert queued.nodes == ""
    assert cluster.job(third).state == "PENDING"   # still, with no GPU free

    cluster.ctl("scancel", str(first))
    assert cluster.wait_job(first, "CANCELLED").state == "CANCELLED"
    started = cluster.wait_job(third, "RUNNING")
    assert started.nodes == running[0].nodes, (started, running)


def test_a_two_node_job_has_a_rank_per_node_and_its_output_is_read_from_the_login_host(
        cluster: SlurmCluster, request: pytest.FixtureRequest) -> None:
    _, there = _out_dir(cluster, request)
    step = 'echo "rank=$SLURM_PROCID node=$SLURMD_NODENAME list=$SLURM_NODELIST nnodes=$SLURM_NNODES"'
    job = cluster.submit("-N2", "--ntasks-per-node=1", f"--gres=gpu:{GPUS_PER_NODE}", "-o", f"{there}/%j.out",
                         wrap=f"srun bash -c {shlex.quote(step)}")
    done = cluster.wait_job(job, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")
    assert done.state == "COMPLETED" and done.nodes == "n[1-2]", done
    # through the login host's sshd, as the job's owner: the shared filesystem is the same there
    res = cluster.ssh("tester", f"cat {shlex.quote(f'{there}/{job}.out')}")
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.splitlines()) == [
        "rank=0 node=n1 list=n[1-2] nnodes=2",
        "rank=1 node=n2 list=n[1-2] nnodes=2",
    ], res.stdout


def test_a_job_is_cancelled_only_by_its_owner_or_root(cluster: SlurmCluster) -> None:
    # submitted over SSH, as bringup would as a second operator
    _, there = cluster.shared(BLOCKERS)
    res = cluster.ssh("tester2", f"sbatch --parsable -N1 --gres=gpu:1 -o {there}/%j.out --wrap 'exec sleep infinity'")
    assert res.returncode == 0, res.stderr
    theirs = int(res.stdout.strip())
    assert cluster.wait_job(theirs, "RUNNING").user == "tester2"

    denied = cluster.ssh("tester", f"scancel {theirs}")
    assert "denied" in (denied.stdout + denied.stderr).lower(), denied
    assert cluster.job(theirs).state == "RUNNING"

    assert cluster.ssh("tester2", f"scancel {theirs}").returncode == 0
    assert cluster.wait_job(theirs, "CANCELLED").state == "CANCELLED"

    other = cluster.submit_blocker(1, user="tester2")
    cluster.ctl("scancel", str(other))   # root
    assert cluster.wait_job(other, "CANCELLED").state == "CANCELLED"


def test_a_node_whose_slurmd_stops_goes_down_and_comes_back_when_it_starts(cluster: SlurmCluster) -> None:
    assert cluster.node_state("n1") == "IDLE"
    cluster.stop_slurmd("n1")
    # NOT_RESPONDING at the controller's next ping, DOWN after SlurmdTimeout (20 s)

    def down_state() -> str | None:
        state = cluster.node_state("n1")
        return state if state.startswith("DOWN") else None
    down = until("n1 DOWN", down_state, timeout=120, every=1.0)
    assert "NOT_RESPONDING" in down, down
    assert cluster.node_state("n2") == "IDLE"
    # a job asking for the GPUs of one node goes to the other, the only one up
    job = cluster.submit_blocker(GPUS_PER_NODE)
    assert cluster.job(job).nodes == "n2"

    cluster.start_slurmd("n1")
    until("n1 IDLE again", lambda: cluster.node_state("n1") == "IDLE", timeout=60, every=0.5)
