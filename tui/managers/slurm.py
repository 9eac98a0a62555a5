"""The `slurm` manager: the server as a Slurm batch job, driven from the cluster's login host over SSH.

- The run is the job: its id (`+N` once Slurm has requeued it), from `sbatch --parsable`, kept in bringup's records
  on the login host (`job.json`, under the operator's home: `.local/state/bringup/deployments/NAME`).
- State from `scontrol show job -o` (slurm_job.py), moments as Unix times (`SLURM_TIME_FORMAT=%s`): a PENDING job is
  `activating` and `queued` (Slurm's reason and its expected start); RUNNING is `active`; COMPLETING is the job
  ending on its nodes (`deactivating` once bringup asked, else still the live run until Slurm's last word). A job
  that ended unasked carries Slurm's verdict (TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, CANCELLED by whom,
  FAILED with its exit code): the failure's kind and hint. A cancel bringup asked is recorded first (`cancel.json`),
  so that any bringup watching reads it as a stop, not as a cancel by someone else.
- Start: the batch script (slurm_script.py) on `sbatch`'s stdin, after the output directory on the shared
  filesystem is made (0700, the guarded way) -- never while the last job still holds its nodes.
- Stop: `scancel` (Slurm's SIGTERM, then its kill after KillWait), then a wait until the job has ended on every node
  (no COMPLETING): only then are its nodes and GPUs free for another job, and the next `sbatch` may follow.
- The log: every node's file and the batch output on the shared filesystem, read from the login host (slurm_log.py).
- Where it runs (`Placed`, placement.py): the head node's address from Slurm (`NodeAddr`), the endpoint on it; each
  node's GPUs read through the allocation (`srun --jobid=J --overlap -w NODE nvidia-smi`), where SSH to compute nodes
  is not allowed. Between jobs, the GPUs as Slurm lists them (no memory figures: no allocation to read them by).
- Flags: the command line of the next job (`argv.json`, the previous and the last ready beside it), as the process
  and container managers keep it, in bringup's records on the login host with the lock (slurm_records.py: the
  operator's own, no root); or an operator's own batch script's server line (slurm_batch.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any

from tui.config.deployments import SlurmDeployment
from tui.config.slurm_words import SLURM_HEAD
from tui.guard.text import split_lines
from tui.lifecycle.nodes import gpu_key, pid_key
from tui.managers import AsyncLock, ManagerError, PermanentManagerError, Report, unreported
from tui.managers.lock_record import this_user_at_host
from tui.managers.pids import pid_or_none
from tui.managers.placement import Placement
from tui.managers.slurm_batch import BatchScriptError, rewrite, server_line
from tui.managers.slurm_job import (
    Job,
    Node,
    cancelled_by,
    killed_by,
    parse_job,
    parse_nodes,
    queued_words,
    submitted_id,
    verdict,
)
from tui.managers.slurm_log import BATCH, Source, follow, read
from tui.managers.slurm_records import Records
from tui.managers.slurm_script import JobSpec, batch_output, node_log, sbatch_argv, script
from tui.model import GpuSample, GpuSnapshot, LogLine, Queued, UnitState
from tui.transport import CommandResult, Transport, TransportError

#: every Slurm command's moments as Unix times (slurm_job.py)
_ENV = ["env", "SLURM_TIME_FORMAT=%s"]
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._/-]*")
#: a node list Slurm's commands are asked about at most (a partition of thousands is not read whole)
MAX_NODES = 64


class SlurmManager:
    kind = "slurm"
    can_control = True
    sees_run = True

    def __init__(self, transport: Transport, name: str, dep: SlurmDeployment, records: str,
                 nvidia_smi: Sequence[str] = ("nvidia-smi",)) -> None:
        if not _PLAIN.fullmatch(name) or not _PLAIN_PATH.fullmatch(dep.output_dir):
            # both go into the job's name and sbatch's `--output`, where Slurm reads `%j`, `%u`... as its own
            raise PermanentManagerError(f"a Slurm deployment's name and output_dir are plain (letters, digits, "
                                        f"`._-`, and `/` in the path): {name!r}, {dep.output_dir!r}")
        self.transport = transport
        self.dep = dep
        self.log_dir = f"{dep.output_dir.rstrip('/')}/{name}"
        self.records = Records(transport, records, self.log_dir)
        self.job_name = f"bringup-{name}"
        self.nvidia_smi = tuple(nvidia_smi)
        shape = f"{dep.node_count} node{'s' if dep.node_count > 1 else ''}" + \
            (f" x {dep.gpus_per_node} GPUs" if dep.gpus_per_node else "")
        self.target = f"Slurm job {self.job_name} ({shape}" + (f", partition {dep.partition})" if dep.partition
                                                               else ")")
        self._job: Job | None = None  # the last reading
        self._line = ""  # its line, as scontrol printed it
        self._addr: dict[str, str] = {}  # node -> NodeAddr
        self._by: dict[str, str] = {}  # job -> who cancelled it, as far as Slurm says
        self._down: dict[str, str] = {}  # job -> its nodes Slurm does not reach
        self._placed = asyncio.Event()  # set when a reading finds the job's nodes (follow waits on it)

    # ------------------------------------------------------------------ commands and records

    async def _slurm(self, argv: list[str], timeout: float = 30.0, input: bytes | None = None) -> CommandResult:
        res = await self.transport.run([*_ENV, *argv], timeout=timeout, input=input)
        if res.rc == 127 or (res.rc != 0 and "No such file or directory" in res.error_text and argv[0] in
                             res.error_text):
            raise PermanentManagerError(f"{self.transport.name}: `{argv[0]}` not found: is it the cluster's login "
                                        "host, with Slurm's commands on its PATH?")
        return res

    # ------------------------------------------------------------------ the job

    async def _read_job(self, job_id: str) -> Job | None:
        """The job as Slurm lists it now (its line kept in `_line`); None once Slurm has forgotten it (MinJobAge
        after its end)."""
        res = await self._slurm(["scontrol", "show", "job", "-o", job_id])
        if res.rc != 0:
            if "Invalid job id" in res.error_text:
                return None
            raise ManagerError(f"{self.transport.name}: `scontrol show job {job_id}` failed (exit {res.rc}): "
                               f"{res.error_text.strip()[:300]}")
        for line in split_lines(res.text):
            job = parse_job(line)
            if job is not None and job.id == job_id:
                self._line = line
                return job
        return None

    async def _nodes(self, names: Sequence[str]) -> dict[str, Node]:
        if not names:
            return {}
        res = await self._slurm(["scontrol", "show", "node", "-o", ",".join(names[:MAX_NODES])])
        return parse_nodes(res.text) if res.rc == 0 else {}

    async def state(self) -> UnitState:
        rec = await self.records.read("job.json")
        job_id = str(rec.get("job", "")) if isinstance(rec, dict) else ""
        if not job_id.isdigit():
            self._job = None
            return UnitState(active="inactive", sub="no job submitted", argv=tuple(await self.read_argv()))
        job = await self._read_job(job_id)
        if job is not None and job.name != self.job_name:
            job = None  # another job under the id recorded (a cluster whose job ids began again): not this one's
        if job is None:  # forgotten by Slurm: its last reading, kept when it ended
            last = rec.get("last") if isinstance(rec, dict) else None
            job = parse_job(last) if isinstance(last, str) else None
            if job is None:
                self._job = None
                return UnitState(active="inactive", sub=f"job {job_id} ended (Slurm no longer lists it)",
                                 invocation=job_id, argv=_argv(rec))
        elif not job.live and isinstance(rec, dict) and not rec.get("last"):
            await self._keep_last(rec)
        previous, self._job = self._job, job
        if job.nodes and job.state == "RUNNING":
            missing = [n for n in job.nodes if n not in self._addr]
            if missing:
                self._addr.update({n.name: n.addr for n in (await self._nodes(missing)).values()})
            if previous is None or previous.invocation != job.invocation or previous.nodes != job.nodes or \
                    previous.state != job.state:
                self._placed.set()
        return await self._unit(job, rec if isinstance(rec, dict) else {})

    async def _keep_last(self, rec: dict[str, Any]) -> None:
        """The ended job's own line, kept: once Slurm forgets the job, it still says how it ended."""
        with contextlib.suppress(ManagerError, TransportError, OSError):
            await self.records.write("job.json", {**rec, "last": self._line[:20000]})

    async def _unit(self, job: Job, rec: dict[str, Any]) -> UnitState:
        """The job as a run (module docstring): queued, running, ending on its nodes, or ended by Slurm's word."""
        on = ", ".join(job.nodes)
        base = UnitState(active="active", sub=f"running on {on}", invocation=job.invocation,
                         started_at=job.started_at, argv=_argv(rec) if str(rec.get("job", "")) == job.id else ())
        if job.queued:
            at = _clock(job.started_at) if job.started_at else ""
            return replace(base, active="activating", sub="queued", started_at=job.submitted_at,
                           queued=Queued(job.reason, job.started_at, queued_words(job, at)))
        if job.state in ("RUNNING", "SUSPENDED", "SIGNALING", "STAGE_OUT") and not job.completing:
            return base
        if job.completing:  # ending on its nodes: a stop bringup asked, or the live run until Slurm's last word
            asked = await self._asked(job.id)
            return replace(base, active="deactivating" if asked else "active", sub=f"completing on {on}")
        ended = replace(base, exited_at=job.ended_at)
        if job.state == "CANCELLED" and (asked := await self._asked(job.id)):
            return replace(ended, active="inactive", sub=f"cancelled by {asked}")
        v = verdict(job, by=await self._canceller(job) if job.state == "CANCELLED" else "",
                    node_down=await self._node_down(job) if job.state in ("NODE_FAIL", "BOOT_FAIL") else "")
        if v is None:
            return replace(ended, active="inactive", sub=f"{job.state.lower()} (exit code 0)", exit_status=0)
        return replace(ended, active="failed", sub=job.state.lower(), verdict=v,
                       exit_status=-job.exit_signal if job.exit_signal else job.exit_code,
                       ended_on=job.nodes[0] if len(job.nodes) == 1 else "")

    async def _asked(self, job_id: str) -> str:
        """Who of bringup asked this job to stop ("" when no bringup did)."""
        rec = await self.records.read("cancel.json")
        if isinstance(rec, dict) and str(rec.get("job", "")) == job_id:
            return f"bringup ({rec.get('who') or '?'})"
        return ""

    async def _canceller(self, job: Job) -> str:
        """Who cancelled the job: where Slurm's accounting says (`sacct`: `CANCELLED by UID`), else where slurmctld's
        log is on the login host and readable (its last 64 MiB); "" where neither says."""
        if job.id not in self._by:
            by = ""
            with contextlib.suppress(TransportError, ManagerError):
                res = await self._slurm(["sacct", "-n", "-P", "-X", "-j", job.id, "-o", "State"])
                uid = cancelled_by(split_lines(res.text.strip())[0]) if res.rc == 0 and res.text.strip() else ""
                source = "Slurm's accounting"
                if not uid:
                    uid, source = killed_by(await self._ctld_log(job.id), job.id), "slurmctld's log"
                if uid:
                    who = await self.transport.run(["getent", "passwd", uid], timeout=10)
                    name = who.text.split(":", 1)[0] if who.rc == 0 else ""
                    by = f"{name} (uid {uid}, as {source} says)" if name else f"uid {uid} (as {source} says)"
            self._by[job.id] = by
        return self._by[job.id]

    async def _ctld_log(self, job_id: str) -> str:
        """slurmctld's log lines about cancelling the job, where the log is on the login host and readable."""
        conf = await self._slurm(["scontrol", "show", "config"])
        path = next((ln.split("=", 1)[1].strip() for ln in split_lines(conf.text)
                     if ln.startswith("SlurmctldLogFile")), "")
        if not path.startswith("/"):
            return ""
        res = await self.transport.run(["sh", "-c", 'tail -c 67108864 -- "$1" 2>/dev/null | grep -F -- "JobId=$2 "',
                                        "bringup-ctld-log", path, job_id], timeout=20)
        return res.text if res.rc == 0 else ""

    async def _node_down(self, job: Job) -> str:
        if job.id not in self._down:
            nodes = await self._nodes(job.nodes)
            self._down[job.id] = ", ".join(n.name for n in nodes.values() if n.down)
        return self._down[job.id]

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        cur = await self.state()
        if cur.running or cur.active == "deactivating":
            raise ManagerError(f"job {cur.invocation} still holds its place ({cur.sub}): stop it first")
        await self.records.make_dirs(output=True)
        spec = JobSpec(name=self.job_name, argv=tuple(argv), log_dir=self.log_dir, env=dict(self.dep.env),
                       partition=self.dep.partition, node_count=self.dep.node_count,
                       gpus_per_node=self.dep.gpus_per_node, time=self.dep.time, account=self.dep.account,
                       extra=tuple(self.dep.sbatch_args))
        try:
            if self.dep.batch_script:  # the operator's own script, its server line rewritten in a copy
                own = await self._own_script()
                text = rewrite(own, server_line(own), argv)
            else:
                text = script(spec)
        except ValueError as e:
            raise PermanentManagerError(f"cannot write the batch script: {e}") from None
        res = await self._slurm(sbatch_argv(spec, own_script=bool(self.dep.batch_script)), timeout=60,
                                input=text.encode())
        job_id = submitted_id(res.text)
        if res.rc != 0 or not job_id:
            why = (res.error_text or res.text).strip()[:400]
            if "Batch job submission failed" in why or "invalid" in why.lower():
                raise PermanentManagerError(f"sbatch refused the job: {why}")
            raise ManagerError(f"sbatch failed (exit {res.rc}): {why}")
        report("start", f"submitted job {job_id}; its output: {self.log_dir}/job-{job_id}.*")
        try:
            await self.records.write("job.json", {"job": job_id, "argv": list(argv), "name": self.job_name,
                                                "submitted_at": time.time()})
        except (ManagerError, TransportError) as e:
            raise ManagerError(f"job {job_id} was submitted, but bringup could not record it ({e}): "
                               f"`scancel {job_id}` if it is not wanted") from None

    async def stop(self, report: Report = unreported) -> None:
        """`scancel`, then wait until the job has ended on every node (no COMPLETING): only then are its nodes and
        GPUs Slurm's to give again."""
        cur = await self.state()
        job = self._job
        if job is None or not job.live:
            return
        await self.records.write("cancel.json", {"job": job.id, "who": this_user_at_host(), "at": time.time()})
        res = await self._slurm(["scancel", job.id])
        if res.rc != 0 and "Invalid job id" not in res.error_text:
            why = res.error_text.strip()[:300]
            if "ermission" in why or "Access" in why:
                raise PermanentManagerError(f"scancel {job.id} refused: {why}")
            raise ManagerError(f"scancel {job.id} failed (exit {res.rc}): {why}")
        report("stop", f"scancel {job.id} ({cur.sub})")
        deadline = time.monotonic() + self.dep.stop_timeout_s + 30
        said = ""
        while True:
            now = await self._read_job(job.id)
            if now is None or not now.live:
                break
            words = f"job {job.id}: {'COMPLETING' if now.completing else now.state} on {', '.join(now.nodes)}"
            if words != said:
                report("stop", words)
                said = words
            if time.monotonic() > deadline:
                raise ManagerError(f"job {job.id} has not ended on every node within "
                                   f"{self.dep.stop_timeout_s + 30:g} s ({words}): Slurm still holds its nodes")
            await asyncio.sleep(0.5)
        await self.state()
        on = f" on {', '.join(job.nodes)}" if job.nodes else ""
        report("stop", f"job {job.id} ended{on} (no COMPLETING): its nodes and GPUs are Slurm's to give again")

    # ------------------------------------------------------------------ the log

    def _sources(self, job: Job | None, invocation: str) -> list[Source]:
        """The batch output, and each node's log (bringup's script: an operator's own sends all to the first)."""
        job_id = invocation.split("+", 1)[0]
        out = [Source(batch_output(self.log_dir).replace("%j", job_id), BATCH)]
        if job is not None and not self.dep.batch_script:
            out += [Source(node_log(self.log_dir, invocation, n), n) for n in job.nodes]
        return out

    async def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        """The run's log from its first line, then live: once the job has its nodes (a queued job's log begins
        when it starts), every node's and the batch script's."""
        inv = unit.invocation
        while True:
            job = self._job
            if job is not None and job.invocation == inv and job.nodes:
                break
            if job is not None and job.invocation == inv and not job.live:
                return  # ended without ever running (cancelled in the queue): no log to follow
            self._placed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await self._placed.wait()
        async with contextlib.aclosing(follow(self.transport, self._sources(job, inv), inv)) as lines:
            async for line in lines:
                yield line

    def log_source(self, invocation: str) -> str:
        return (f"{self.log_dir}/job-{invocation}.NODE.log on {self.transport.name} (each node's; the batch "
                f"script's: job-{invocation.split('+', 1)[0]}.out)")

    async def read_log(self, invocation: str) -> list[LogLine]:
        job = self._job if self._job is not None and self._job.invocation == invocation else None
        if job is None:
            rec = await self.records.read("job.json")
            last = rec.get("last") if isinstance(rec, dict) else None
            got = parse_job(last) if isinstance(last, str) else None
            job = got if got is not None and got.invocation == invocation else None
        return await read(self.transport, self._sources(job, invocation), invocation, time.time())

    async def pids(self, unit: UnitState) -> set[int] | None:
        """The job's processes on each of its nodes, as Slurm tracks them (`scontrol listpids` on the node, through
        the allocation), keyed by node as the GPU readings are (lifecycle/nodes.py); None when not known."""
        job = self._job
        if not unit.running:
            return set()
        if job is None or job.invocation != unit.invocation or job.state != "RUNNING" or job.completing:
            return None
        out: set[int] = set()
        for i, node in enumerate(job.nodes):
            res = await self._slurm(["srun", f"--jobid={job.id}", "--overlap", "-w", node, "-N1", "-n1", "--quiet",
                                     "scontrol", "listpids", job.id, node])
            if res.rc != 0:
                return None
            rows = [line.split() for line in split_lines(res.text)[1:]]
            out |= {pid_key(i, pid) for row in rows if row and (pid := pid_or_none(row[0])) is not None}
        return out

    # ------------------------------------------------------------------ where it runs

    def placement(self) -> Placement | None:
        job = self._job
        if job is None or job.state != "RUNNING" or job.completing or not job.nodes:
            return None
        addr = self._addr.get(job.nodes[0], job.nodes[0])
        host = f"[{addr}]" if ":" in addr else addr
        gres = (f"--gres=gpu:{self.dep.gpus_per_node}",) if self.dep.gpus_per_node else ()
        commands = tuple(("srun", f"--jobid={job.id}", "--overlap", "-w", n, "-N1", "-n1", "--quiet", *gres,
                          *self.nvidia_smi) for n in job.nodes)
        return Placement(job.invocation, job.nodes, self.dep.endpoint.replace(SLURM_HEAD, host, 1), commands)

    async def unplaced_gpus(self) -> GpuSnapshot:
        names: Sequence[str] = self._job.nodes if self._job is not None else ()
        if not names and self.dep.partition:
            res = await self._slurm(["sinfo", "-h", "-N", "-p", self.dep.partition, "-o", "%N"])
            names = list(dict.fromkeys(res.text.split()))[:MAX_NODES] if res.rc == 0 else []
        nodes = await self._nodes(names)
        gpus = tuple(GpuSample(index=gpu_key(i, g), host=n.name) for i, n in enumerate(nodes.values())
                     for g in range(n.gpus))
        return GpuSnapshot(at=time.time(), gpus=gpus)

    # ------------------------------------------------------------------ flags and the lock

    async def _own_script(self) -> str:
        """The operator's batch script on the login host (slurm_batch.py reads its server line)."""
        data = await self.transport.read_file(self.dep.batch_script)
        if data is None:
            raise PermanentManagerError(f"{self.transport.name}: no batch script {self.dep.batch_script}")
        return data.decode("utf-8", "replace")

    async def read_argv(self) -> list[str]:
        saved = await self.records.read("argv.json")
        if isinstance(saved, list) and saved and all(isinstance(a, str) for a in saved):
            return saved
        if self.dep.batch_script:
            try:
                return server_line(await self._own_script()).argv
            except BatchScriptError as e:
                raise PermanentManagerError(f"{self.dep.batch_script} on {self.transport.name}: {e}") from None
        return list(self.dep.command)

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None:
        if not argv:
            raise ManagerError("refusing to write an empty command")
        await self.save_argv("previous", await self.read_argv())
        await self.records.write("argv.json", list(argv))

    async def read_saved_argv(self, which: str) -> list[str] | None:
        saved = await self.records.read(f"argv.{which}.json")
        return [str(a) for a in saved] if isinstance(saved, list) else None

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        await self.records.write(f"argv.{which}.json", list(argv))

    def lock(self, purpose: str, change: str = "") -> AsyncLock:
        return self.records.lock(purpose, change)


def _argv(rec: Any) -> tuple[str, ...]:
    argv = rec.get("argv") if isinstance(rec, dict) else None
    return tuple(str(a) for a in argv) if isinstance(argv, list) else ()


def _clock(at: float) -> str:
    """A moment as the operator reads it: the time today, the date and time beyond."""
    fmt = "%H:%M:%S" if abs(at - time.time()) < 20 * 3600 else "%Y-%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(at))
