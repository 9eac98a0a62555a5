"""The real Slurm test cluster of `.ci/slurm.sh` from the tests' side: a controller and login host (`ctl`, reached
by bringup only over SSH) and two compute nodes n1, n2 with 4 GPUs each as GRES, sharing `.slurm-shared/` at
/shared. The tests that use it share its GPUs, so they run in one xdist worker (tests/conftest.py, `slurm_cluster`).

Without the cluster they are skipped, unless BRINGUP_SLURM=required (CI, .ci/run), where its absence fails.

Commands run on a host through `.ci/slurm.sh exec-ctl|exec-node` (nsenter: as root, no SSH; `user=` for another
account through runuser), which is how a test sets the scene behind bringup's back; `ssh()` goes the way bringup
goes, through the login host's sshd with the test key."""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.wait import until

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "slurm.sh"
REQUIRED = "BRINGUP_SLURM"
NODES = ("n1", "n2")
#: the GPUs each compute node declares as GRES (tests/testhost/slurm/slurm.conf)
GPUS_PER_NODE = 4
#: where the blockers' output goes, under the shared directory
BLOCKERS = "bringup-blockers"
#: held by the pytest session that uses the cluster (`held`), beside the login host's state directory
SESSION_LOCK = ROOT / ".testhost-slurm" / ".tests-lock"
#: the job states in which a job still holds (or waits for) its nodes
ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"})


class SlurmError(AssertionError):
    """A command on the cluster failed where the test needed it to work."""


@dataclass(frozen=True)
class Job:
    """One line of `squeue -t all`: what the scheduler says of a job now."""
    id: int
    state: str    # PENDING, RUNNING, COMPLETED, CANCELLED, ...
    reason: str   # Resources, Priority, None, ...
    nodes: str    # the allocation's node list (n1, n[1-2]); "" while pending
    user: str


def _script_env() -> dict[str, str]:
    # TESTHOST_* set for another host (a module on the fourth host) must not reach the cluster's hosts
    return {k: v for k, v in os.environ.items() if not k.startswith("TESTHOST_")}


def script(*args: str, check: bool = True, inp: str | None = None, timeout: float = 120) -> str:
    """`.ci/slurm.sh ARGS`: its stdout; a failure raises with its stderr, unless check=False."""
    res = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                         env=_script_env(), input=inp)
    if check and res.returncode != 0:
        raise SlurmError(f"slurm.sh {shlex.join(args)}: exit {res.returncode}: {res.stderr.strip()[-2000:]}")
    return res.stdout


def cluster_up() -> bool:
    """The three hosts up and both nodes known to slurmctld (`.ci/slurm.sh status`, root only)."""
    if not SCRIPT.exists() or os.geteuid() != 0:
        return False
    res = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env=_script_env())
    return res.returncode == 0


@dataclass(frozen=True)
class SlurmCluster:
    """The running cluster, as `.ci/slurm.sh env` describes it."""
    ssh_port: int
    ssh_key: Path
    known_hosts: Path
    #: an OpenSSH config with `slurm-login` (root), `slurm-tester` and `slurm-tester2` on the login host
    ssh_config: Path
    #: the shared directory on this side, and where the hosts see it
    shared_dir: Path
    shared_mount: str
    ctld_port: int

    @classmethod
    def from_script(cls) -> SlurmCluster:
        env = dict(line.removeprefix("export ").split("=", 1) for line in script("env").splitlines()
                   if line.startswith("export BRINGUP_SLURM_"))
        return cls(ssh_port=int(env["BRINGUP_SLURM_SSH_PORT"]), ssh_key=Path(env["BRINGUP_SLURM_SSH_KEY"]),
                   known_hosts=Path(env["BRINGUP_SLURM_KNOWN_HOSTS"]),
                   ssh_config=Path(env["BRINGUP_SLURM_SSH_CONFIG"]),
                   shared_dir=Path(env["BRINGUP_SLURM_SHARED_DIR"]),
                   shared_mount=env["BRINGUP_SLURM_SHARED_MOUNT"], ctld_port=int(env["BRINGUP_SLURM_CTLD_PORT"]))

    # ------------------------------------------------------------------------------------------------ commands

    def ctl(self, *argv: str, user: str | None = None, check: bool = True, timeout: float = 60) -> str:
        """ARGV on the login host, as root or as `user`; its stdout."""
        return script("exec-ctl", *_as_user(user, argv), check=check, timeout=timeout)

    def node(self, name: str, *argv: str, user: str | None = None, check: bool = True, timeout: float = 60) -> str:
        """ARGV on compute node `name` (n1, n2), as root or as `user`; its stdout."""
        return script("exec-node", name, *_as_user(user, argv), check=check, timeout=timeout)

    def run_ctl(self, *argv: str, user: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """ARGV on the login host, its exit status and both streams as they are (for a command that should fail)."""
        return subprocess.run(["bash", str(SCRIPT), "exec-ctl", *_as_user(user, argv)], capture_output=True,
                              text=True, cwd=ROOT, timeout=timeout, env=_script_env())

    def ssh(self, user: str, command: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """COMMAND through the login host's sshd as `user` (root, tester, tester2): the way bringup reaches it."""
        host = "slurm-login" if user == "root" else f"slurm-{user}"
        return subprocess.run(["ssh", "-F", str(self.ssh_config), host, command], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def stop_slurmd(self, name: str) -> None:
        """Node `name` lost to the controller: its slurmd stopped (its jobs' processes stay, KillMode=process)."""
        script("stop-slurmd", name)

    def start_slurmd(self, name: str) -> None:
        script("start-slurmd", name)

    # ------------------------------------------------------------------------------------------------- reading

    def node_state(self, name: str) -> str:
        """`scontrol show node`'s State, e.g. IDLE, MIXED, ALLOCATED, DOWN+NOT_RESPONDING, IDLE+NOT_RESPONDING."""
        out = self.ctl("scontrol", "-o", "show", "node", name)
        m = re.search(r"\bState=(\S+)", out)
        if not m:
            raise SlurmError(f"no State in scontrol's line for {name}: {out!r}")
        return m.group(1)

    def jobs(self) -> list[Job]:
        """Every job slurmctld still knows (ended ones for MinJobAge, 300 s)."""
        out = self.ctl("squeue", "-h", "-t", "all", "-o", "%i|%T|%r|%N|%u")
        return [_job(line) for line in out.splitlines() if line.strip()]

    def job(self, job_id: int) -> Job:
        out = self.ctl("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%i|%T|%r|%N|%u")
        lines = [line for line in out.splitlines() if line.strip()]
        if len(lines) != 1:
            raise SlurmError(f"squeue -j {job_id}: {out!r}")
        return _job(lines[0])

    def wait_job(self, job_id: int, *states: str, timeout: float = 60) -> Job:
        """The job once its state is one of `states`."""
        seen: list[Job] = []

        def reached() -> Job | None:
            j = self.job(job_id)
            seen.append(j)
            return j if j.state in states else None
        return until(lambda: f"job {job_id} in {states} (last: {seen[-1] if seen else None})", reached, timeout,
                     every=0.3)

    # ------------------------------------------------------------------------------------------------- acting

    def shared(self, name: str) -> tuple[Path, str]:
        """A directory `name` under the shared filesystem, writable by every user (mode 1777, made afresh): its path
        on this side and on the hosts."""
        here = self.shared_dir / name
        here.mkdir(parents=True, exist_ok=True)
        here.chmod(0o1777)
        return here, f"{self.shared_mount}/{name}"

    def submit(self, *sbatch_args: str, wrap: str, user: str = "tester") -> int:
        """`sbatch --parsable ARGS --wrap WRAP` on the login host as `user`: the job id."""
        out = self.ctl("sbatch", "--parsable", *sbatch_args, "--wrap", wrap, user=user).strip()
        if not out.split(";")[0].isdigit():
            raise SlurmError(f"sbatch said {out!r}")
        return int(out.split(";")[0])

    def submit_blocker(self, gpus: int = GPUS_PER_NODE, *, node: str | None = None, user: str = "tester",
                       wait_running: bool = True) -> int:
        """A job that holds `gpus` GPUs of one node (`node`, else where Slurm puts it) until cancelled: the other
        work that a bring-up queues behind."""
        _, there = self.shared(BLOCKERS)
        args = ["-N1", f"--gres=gpu:{gpus}", "-J", "blocker", "-o", f"{there}/%j.out"]
        if node:
            args += ["-w", node]
        job_id = self.submit(*args, wrap="exec sleep infinity", user=user)
        if wait_running:
            self.wait_job(job_id, "RUNNING")
        return job_id

    def cancel_all(self, timeout: float = 60) -> None:
        """Every job cancelled (as root), and waited on until none holds a node."""
        ids = [str(j.id) for j in self.jobs() if j.state in ACTIVE]
        if ids:
            self.ctl("scancel", *ids)
        until(lambda: f"no job active (left: {[j for j in self.jobs() if j.state in ACTIVE]})",
              lambda: not any(j.state in ACTIVE for j in self.jobs()), timeout, every=0.3)

    def wait_idle(self, timeout: float = 90) -> None:
        """Both nodes IDLE (responding, no job on them) and no job active: the cluster as `up` left it."""
        def idle() -> bool:
            return all(self.node_state(n) == "IDLE" for n in NODES) and not any(j.state in ACTIVE
                                                                                for j in self.jobs())
        until(lambda: f"nodes idle ({ {n: self.node_state(n) for n in NODES} }) and no job active", idle, timeout,
              every=0.5)

    def reset(self) -> None:
        """The cluster back to idle whatever a test left: both slurmd running, every job cancelled."""
        for n in NODES:
            self.start_slurmd(n)   # a no-op where it runs
        self.cancel_all()
        self.wait_idle()


def _as_user(user: str | None, argv: tuple[str, ...]) -> tuple[str, ...]:
    # runuser sets HOME, USER and LOGNAME to the user's; the working directory is / on every host
    return argv if user in (None, "root") else ("runuser", "-u", str(user), "--", *argv)


def _job(line: str) -> Job:
    f = line.strip().split("|")
    if len(f) != 5 or not f[0].isdigit():
        raise SlurmError(f"squeue line {line!r}")
    return Job(id=int(f[0]), state=f[1], reason=f[2], nodes="" if f[3] == "(null)" else f[3], user=f[4])


@contextmanager
def held(timeout: float = 1800) -> Iterator[None]:
    """The cluster for this pytest session alone. Every session on this machine shares the one cluster, and each
    test cancels every job on it to start from idle: two sessions at once (two developers' runs) cancelled
    each other's jobs mid-test. In CI one xdist worker runs all of its tests, and nothing waits here. The lock is
    an flock, so a killed session leaves none behind."""
    SESSION_LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(SESSION_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def taken() -> bool:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # BlockingIOError while another session holds it
        return True
    try:
        until(f"the Slurm test cluster free of another pytest session (flock {SESSION_LOCK})", taken, timeout,
              every=1.0, retry_on=(BlockingIOError,))
        yield
    finally:
        os.close(fd)


def require_cluster() -> SlurmCluster:
    """The cluster, or a skip (a failure with BRINGUP_SLURM=required: CI must not pass by skipping)."""
    if not cluster_up():
        why = "the Slurm test cluster is not up (as root: bash .ci/slurm.sh up)"
        if os.environ.get(REQUIRED) == "required":
            pytest.fail(f"{why}, but {REQUIRED}=required (.ci/run brings it up)")
        pytest.skip(f"{why}; {REQUIRED}=required makes this a failure")
    return SlurmCluster.from_script()
