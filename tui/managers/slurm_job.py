"""What Slurm says about a job and its nodes, read from its own commands' output (pure: no I/O).

Read from `scontrol show job -o J` and `scontrol show node -o NODE` (one line of `Key=Value` words each), run with
`SLURM_TIME_FORMAT=%s` so that every moment is a Unix time, never a local date the login host's zone decides. The
words and their keys are Slurm 22.05's (src/api/job_info.c, node_info.c; the fixtures in tests/fixtures/slurm/ are
that release's real output). A job's state is its base state (`JobState=` names the COMPLETING or CONFIGURING flag
instead while it is set); how a job that ended unasked ended is a `Verdict`: the failure's kind, Slurm's words, and
what to do about it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tui.guard.numbers import EPOCH_MAX, EPOCH_MIN, real_or_none, whole_or_none
from tui.guard.text import split_lines
from tui.model import FailureKind, Verdict

#: a key starts a word: `JobState=`, `AllocNode:Sid=`, `MinMemoryNode=`; a value runs to the next key (a value
#: may hold `=`, as `TRES=cpu=1,gres/gpu=4`, but never ` Key=`)
_KEY = re.compile(r"(?:^|\s)([A-Z][A-Za-z_:/]*)=")
#: the states of a job that has not ended (squeue(1), JOB STATE CODES)
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "CONFIGURING",
                     "SUSPENDED", "STOPPED", "RESIZING", "SPECIAL_EXIT"})
LIVE = frozenset({"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"}) | WAITING
#: the states in which a job holds no node yet (the queue)
QUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "CONFIGURING"})
#: what `scontrol` prints for a moment it does not know
_NO_TIME = frozenset({"Unknown", "None", "N/A", "0", ""})


def fields(line: str) -> dict[str, str]:
    """One `-o` line as its keys and values (a key given twice keeps its first value)."""
    out: dict[str, str] = {}
    marks = list(_KEY.finditer(line))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        out.setdefault(m.group(1), line[m.end():end].strip())
    return out


def moment(value: str) -> float | None:
    """A moment as `SLURM_TIME_FORMAT=%s` prints it; None for one Slurm does not know."""
    if value in _NO_TIME:
        return None
    return real_or_none(value, low=EPOCH_MIN, high=EPOCH_MAX, text=True)


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Slurm's compressed node list as names, in its order: `n[1-2]`, `gpu[01-03,07]`, `a1,b[2-3]` (the forms
    `scontrol show hostnames` expands; a list it would not print, empty)."""
    if text in ("", "(null)", "None"):
        return ()
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text + ","):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    out: list[str] = []
    for item in items:
        m = re.fullmatch(r"([^\[\]]*)\[([0-9,\-]+)\]([^\[\]]*)", item)
        if m is None:
            if "[" in item:
                return ()
            out.append(item)
            continue
        prefix, ranges, suffix = m.groups()
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            a = whole_or_none(lo, low=0, text=True)
            b = whole_or_none(hi or lo, low=0, text=True)
            if a is None or b is None or b < a or b - a > 4096:
                return ()
            out += [f"{prefix}{n:0{len(lo)}d}{suffix}" for n in range(a, b + 1)]
    return tuple(out)


def _count(value: str) -> int:
    return whole_or_none(value, low=0, text=True) or 0


@dataclass(frozen=True, slots=True)
class Job:
    """One job as `scontrol show job -o` describes it."""

    id: str
    name: str
    user: str
    #: the base state (RUNNING, PENDING, TIMEOUT...); COMPLETING and CONFIGURING are flags over it (`completing`)
    state: str
    reason: str
    nodes: tuple[str, ...]
    batch_host: str
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None
    time_limit: str
    run_time: str
    #: `ExitCode=E:S`: the exit code and the signal that ended the batch script (0 when none)
    exit_code: int | None
    exit_signal: int | None
    restarts: int
    #: the flag `JobState=` names while it is set: the job is ending on its nodes (epilog, processes killed)
    completing: bool = False

    @property
    def invocation(self) -> str:
        """The run: the job, and its requeue count once Slurm has run it again (the same id, another run)."""
        return self.id if not self.restarts else f"{self.id}+{self.restarts}"

    @property
    def live(self) -> bool:
        return self.completing or self.state in LIVE

    @property
    def queued(self) -> bool:
        return self.state in QUEUED and not self.completing


def parse_job(line: str) -> Job | None:
    """A job from its `scontrol show job -o` line; None for a line that is no job's."""
    f = fields(line)
    job_id = f.get("JobId", "")
    if not job_id.isdigit():
        return None
    state = f.get("JobState", "")
    completing = state == "COMPLETING"
    code, _, sig = f.get("ExitCode", "").partition(":")
    user = f.get("UserId", "")
    return Job(id=job_id, name=f.get("JobName", ""), user=user.split("(", 1)[0], state=state,
               reason=f.get("Reason", ""), nodes=expand_hostlist(f.get("NodeList", "")),
               batch_host=f.get("BatchHost", ""), submitted_at=moment(f.get("SubmitTime", "")),
               started_at=moment(f.get("StartTime", "")), ended_at=moment(f.get("EndTime", "")),
               time_limit=f.get("TimeLimit", ""), run_time=f.get("RunTime", ""),
               exit_code=whole_or_none(code, low=0, high=255, text=True),
               exit_signal=whole_or_none(sig, low=0, high=255, text=True), restarts=_count(f.get("Restarts", "")),
               completing=completing)


def parse_jobs(text: str) -> list[Job]:
    return [j for line in split_lines(text) if (j := parse_job(line)) is not None]


@dataclass(frozen=True, slots=True)
class Node:
    """One node as `scontrol show node -o` describes it: where it is reached, its state, its GPUs."""

    name: str
    addr: str
    state: str
    gpus: int
    reason: str = ""

    @property
    def down(self) -> bool:
        """Slurm does not reach it (DOWN, NOT_RESPONDING: `State=DOWN+NOT_RESPONDING`, `IDLE*`)."""
        words = set(re.split(r"[+*]", self.state))
        return bool(words & {"DOWN", "NOT_RESPONDING", "FAIL", "FAILING"}) or self.state.endswith("*")


def parse_node(line: str) -> Node | None:
    f = fields(line)
    name = f.get("NodeName", "")
    if not name:
        return None
    gres = re.search(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", f.get("Gres", ""))
    return Node(name=name, addr=f.get("NodeAddr", "") or name, state=f.get("State", ""),
                gpus=_count(gres.group(1)) if gres else 0, reason=f.get("Reason", ""))


def parse_nodes(text: str) -> dict[str, Node]:
    return {n.name: n for line in split_lines(text) if (n := parse_node(line)) is not None}


def submitted_id(text: str) -> str:
    """The job id `sbatch --parsable` prints (`12` or `12;cluster`); "" when it printed none."""
    for line in split_lines(text):
        first = line.strip().split(";", 1)[0]
        if first.isdigit():
            return first
    return ""


def cancelled_by(sacct_state: str) -> str:
    """Who cancelled a job, as `sacct -o State` says it (`CANCELLED by 1001`: src/sacct/print.c), "" if it does
    not (no accounting, or another state)."""
    m = re.match(r"^CANCELLED by (\d+)$", sacct_state.strip())
    return m.group(1) if m else ""


def killed_by(log: str, job_id: str) -> str:
    """Who asked slurmctld to cancel the job, as its log says (src/slurmctld/proc_req.c: `REQUEST_KILL_JOB JobId=J
    uid U`; job_mgr.c: `Security violation, REQUEST_KILL_JOB RPC for JobId=J from uid U`, a request refused): the
    uid of the last request not refused, "" when the log names none."""
    asked = re.findall(rf"REQUEST_KILL_JOB JobId={job_id} uid (\d+)", log)
    refused = set(re.findall(rf"REQUEST_KILL_JOB RPC for JobId={job_id} from uid (\d+)", log))
    return next((uid for uid in reversed(asked) if uid not in refused), "")


# ---------------------------------------------------------------------------------------------------- words


def queued_words(job: Job, at: str = "") -> str:
    """`queued: Resources (the GPUs it asks for are held by other jobs); Slurm expects it to start at 14:05:12`.
    `at`: the expected start in words, when Slurm gives one."""
    # a reason Slurm writes as a sentence has its spaces made underscores (`ReqNodeNotAvail,_UnavailableNodes:n2`:
    # src/api/job_info.c); its codes have none
    if job.completing or job.state == "CONFIGURING":
        return "allocated; its nodes are being configured (CONFIGURING)"
    if not job.reason or job.reason == "None":  # just submitted: the scheduler has not looked at it yet
        return "queued: submitted, not yet looked at by the scheduler" + \
            (f"; Slurm expects it to start at {at}" if at else "")
    reason = job.reason.replace("_", " ")
    meaning = next((m for k, m in REASONS.items() if reason.startswith(k)), "")
    return f"queued: {reason}" + (f" ({meaning})" if meaning else "") + \
        (f"; Slurm expects it to start at {at}" if at else "")


#: what the commonest reasons a job waits mean (squeue(1), JOB REASON CODES); a QOS or association limit is
#: named by Slurm itself (`QOSMaxGRESPerUser`, `AssocGrpGRES`), matched by its start
REASONS: Mapping[str, str] = {
    "Resources": "the nodes or GPUs it asks for are held by other jobs",
    "Priority": "jobs of higher priority are ahead of it",
    "ReqNodeNotAvail": "a node it needs is unavailable (down, drained or reserved)",
    "NodeDown": "a node it needs is down",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition takes no jobs now",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows now",
    "PartitionTimeLimit": "its time limit is over its partition's",
    "QOS": "a limit of its QOS",
    "Assoc": "a limit of its account",
    "BeginTime": "its start time has not come",
    "Dependency": "it waits on another job",
    "JobHeldUser": "held by its owner (scontrol release)",
    "JobHeldAdmin": "held by an administrator",
    "Licenses": "it waits for a license",
    "Reservation": "it waits for its reservation",
    "launch failed requeued held": "its launch failed and it is held",
}


def verdict(job: Job, *, by: str = "", node_down: str = "") -> Verdict | None:
    """How a job that ended unasked ended, by Slurm's word; None for a job that has not ended, ended cleanly
    (COMPLETED, exit 0), or was cancelled (`by`: who, where known; a cancel by bringup never gets here)."""
    j = f"job {job.id}"
    if job.state in ("TIMEOUT", "DEADLINE"):
        limit = f" ({job.time_limit})" if job.time_limit else ""
        what = "its time limit" if job.state == "TIMEOUT" else "its deadline"
        return Verdict(FailureKind.TIME_LIMIT, f"Slurm ended {j} at {what}{limit} ({job.state})",
                       "the job reached its time limit: a longer `time` for the deployment (sbatch --time, up to its "
                       "partition's MaxTime: `scontrol show partition`), then start it again")
    if job.state in ("NODE_FAIL", "BOOT_FAIL"):
        where = f" {node_down}" if node_down else ""
        return Verdict(FailureKind.NODE_FAIL, f"Slurm ended {j}: its node{where} failed ({job.state})",
                       "a node of the job stopped answering Slurm (its slurmd, its network or the machine: "
                       "`sinfo -R` says why); started again, the job runs where Slurm places it")
    if job.state == "PREEMPTED":
        return Verdict(FailureKind.PREEMPTED, f"Slurm preempted {j} for other work (PREEMPTED)",
                       "its partition or QOS lets other jobs preempt it: submit it where it is not preemptible "
                       "(partition, --qos in sbatch_args), or start it again")
    if job.state == "OUT_OF_MEMORY":
        return Verdict(FailureKind.OOM, f"Slurm ended {j}: out of host memory (OUT_OF_MEMORY, its memory limit on "
                       "a node)", "host RAM, not GPU memory: ask for more (--mem=... in sbatch_args; --mem=0 takes a "
                       "node's whole memory), or lower what the server holds in host memory")
    if job.state == "CANCELLED":
        who = f"by {by}" if by else "by someone other than bringup (no accounting here to say who: `sacct`)"
        return Verdict(FailureKind.CANCELLED, f"{j} was cancelled {who} (CANCELLED)",
                       "an administrator, the account in another session or a script cancelled it: "
                       "`bringup start` submits it again")
    if job.state == "FAILED" or (job.state == "COMPLETED" and (job.exit_code or job.exit_signal)):
        sig = f", signal {job.exit_signal}" if job.exit_signal else ""
        return Verdict(FailureKind.EXIT, f"{j} FAILED: exit code {job.exit_code}{sig} ({job.reason or 'FAILED'})")
    return None
