"""The sweep protocol: every configuration brought up by the safe restart under one lock held for the whole sweep,
then warmup and the matrix's cells, each valid only if it was measured on one run from start to end.

Why each rule: the seeds' script reported all four configurations "failed to start" (CUDA OOM: the old run's
memory was not yet released), and an earlier run benchmarked a server that had gone down between the readiness
check and the first request. So: ready only on a generation from the new invocation (ops/restart.py); the running
command line checked against the configuration; the invocation polled during each cell; a cell measured across a
crash or restart is retried once on a fresh run, then recorded invalid with the reason; a failed configuration is
recorded with the reducer's failure and the sweep goes on.

It drives the engine through `SweepEngine`, a Protocol (ops' EngineView plus the failure naming), never its
class; the warmup and the cells' requests, with the run watched during each, are load.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from tui.lifecycle.incident import record_command
from tui.lifecycle.secrets import REDACTED, unredact_argv
from tui.managers import LockHeld, ManagerError
from tui.model import Failure, FailureKind, Outcome, Phase, Result, Step, StepStatus
from tui.ops import restart as protocol
from tui.ops.engine_view import EngineView
from tui.sweep.load import Load, invalid_cell
from tui.sweep.metrics import SloSpec
from tui.sweep.plan import Cell, Plan, SweepConfig
from tui.sweep.recorder import Recorder, remove_pointer, write_pointer
from tui.sweep.results import (
    DONE,
    FAILED,
    INTERRUPTED,
    RESTORE,
    RUNNING,
    ConfigRecord,
    FailureInfo,
    StepRecord,
    SweepMeta,
    SweepResults,
)
from tui.sweep.summary import best_config, best_overall, write_summaries
from tui.transport import TransportError
from tui.words import plural

#: why a configuration whose flags are those running is restarted all the same: the cells of every configuration are
#: measured on a run started for them, with its own time to ready and no earlier load's prompts in the server's cache
#: (the plan's prompts repeat from one configuration to the next)
SAME_FLAGS_WHY = "restarted all the same: every configuration is measured from a fresh start (its time to ready, " \
    "no earlier configuration's prompts cached)"

#: a restart's results that end the whole sweep, not only its configuration: another holds the lock or another run
#: took ours over (what follows would not be this sweep's), or a refusal that the next configuration would meet too
#: (a permanent error, no GPU readings to show the memory released)
ENDS_THE_SWEEP = frozenset({Result.SUPERSEDED, Result.LOCK_HELD, Result.REFUSED, Result.UNVERIFIED})


class SweepEngine(EngineView, Protocol):
    """What the sweep uses of an engine: everything a restart uses, and the deployment's name in a failure's hint."""

    def named(self, failure: Failure | None) -> Failure | None: ...


class SweepAborted(Exception):
    """The sweep cannot go on (the lock lost, another run took over, a permanent error): the message says why."""


@dataclass
class SweepOptions:
    keep: str = "original"  # original | best
    request_timeout_s: float = 600.0
    host: str = ""
    state_dir: Path | None = None
    resume: SweepResults | None = None


@dataclass
class SweepResult:
    status: str
    results_dir: Path
    message: str
    best: str | None = None
    #: every valid cell of the results directory (summary.csv's rows), this run's and those a resume kept
    valid_cells: int = 0
    invalid_cells: int = 0
    failed_configs: list[str] = field(default_factory=list)
    #: of `valid_cells`, those measured by an earlier run and kept by this one (--resume)
    resumed_cells: int = 0
    #: whether the best configuration's lead is more than the spread of its own measurements (summary.md says so)
    best_clear: bool = False

    @property
    def new_cells(self) -> int:
        return self.valid_cells - self.resumed_cells


class SweepRunner:
    def __init__(self, engine: SweepEngine, plan: Plan, recorder: Recorder, endpoint: str | Callable[[], str],
                 options: SweepOptions) -> None:
        self.engine = engine
        self.plan = plan
        self.rec = recorder
        #: the URL that reaches the run now (a function: the engine's, which follows a forward or a placed run)
        self._endpoint = endpoint if callable(endpoint) else (lambda: endpoint)
        self.opt = options
        self.stop_requested = False
        self.original_argv: list[str] = []
        self.held: protocol.HeldLock | None = None
        self.current = ""  # the configuration the deployment runs now (as far as this sweep knows)
        self.valid = self.invalid = 0
        #: the (configuration, cell) this run measured valid: the rest of the directory's valid cells were resumed
        self.measured: set[tuple[str, str]] = set()
        self.failed: list[str] = []
        specs = engine.flag_specs
        self.specs = list(specs)
        s = plan.slo
        slo = SloSpec(s.ttft_ms, s.tpot_ms, s.e2el_ms, s.describe()) if s else None
        #: the warmup and the cells' requests, on the configuration's ready run
        self.load = Load(engine, plan, lambda: self.endpoint, options.request_timeout_s, slo, self._step)

    @property
    def endpoint(self) -> str:
        return self._endpoint().rstrip("/")

    def request_stop(self) -> None:
        """Ctrl-C: stop after the current step (a restart, or a cell), keeping everything measured."""
        self.stop_requested = True

    # ------------------------------------------------------------------------------------------------ the sweep

    async def run(self) -> SweepResult:
        mgr = self.engine.manager
        if not mgr.can_control:
            raise SweepAborted(f"{self.engine.name} is observe-only: bringup cannot restart it")
        n = len(self.plan.configs)
        lock = mgr.lock(f"sweep {self.engine.name}", f"sweep {self.plan.name}: {plural(n, 'configuration')}")
        status, message = FAILED, ""
        try:
            async with lock as info:
                self.held = protocol.HeldLock(lock, info)
                prev = self.opt.resume.meta if self.opt.resume else None
                # resumed: the deployment's flags before the first run, not those the interrupt left it on; their
                # secrets (recorded as `***`) from the flags it has now
                self.original_argv = await self._original(prev.original_argv) if prev and prev.original_argv \
                    else await mgr.read_argv()
                self._meta(RUNNING, started=prev.started_at if prev else time.time())
                if self.opt.state_dir is not None:
                    write_pointer(self.opt.state_dir, self.engine.name, self.rec.dir)
                try:
                    status, message = await self._configs()
                    if status == DONE:
                        await self._restore()
                except asyncio.CancelledError:
                    status, message = INTERRUPTED, "interrupted at once (second Ctrl-C)"
                    raise
                except SweepAborted as e:
                    status, message = FAILED, str(e)
        except LockHeld as e:
            raise SweepAborted(f"refused: {e}") from None
        finally:
            self._finish(status)
        res = self._results()
        valid = res.valid_cells()
        resumed = sum(1 for c in valid if (c.config, c.cell) not in self.measured)
        verdict = best_overall(res)
        return SweepResult(status, self.rec.dir, message, best_config(res), len(valid), self.invalid, self.failed,
                           resumed, verdict is not None and verdict.clear)

    async def _original(self, recorded: Sequence[str]) -> list[str]:
        """The recorded original flags, each secret's value (`***` in sweep.json) taken from the flags the server has
        now; a secret it no longer has aborts the resume (`***` would be started as the key)."""
        if not any(a.endswith(REDACTED) for a in recorded):
            return list(recorded)
        try:
            return unredact_argv(recorded, await self.engine.manager.read_argv())
        except ValueError as e:
            raise SweepAborted(f"cannot resume: {e}") from None

    def _finish(self, status: str) -> None:
        if self.rec.meta is not None and self.rec.meta.finished_at is None:
            self._meta(status, finished=time.time())
            with contextlib.suppress(OSError):
                write_summaries(self.rec.dir)
        if self.opt.state_dir is not None:
            remove_pointer(self.opt.state_dir, self.engine.name)

    def _results(self) -> SweepResults:
        from tui.sweep.results import read_results

        return read_results(self.rec.dir)

    def _meta(self, status: str, started: float | None = None, finished: float | None = None) -> None:
        m = self.rec.meta
        self.rec.write_meta(SweepMeta(
            deployment=self.engine.name, host=self.opt.host or socket.gethostname(),
            started_at=started if started is not None else (m.started_at if m else time.time()),
            original_argv=tuple(self.original_argv), configs=tuple(c.name for c in self.plan.configs),
            cells=tuple(c.id for c in self.plan.cells), status=status, pid=os.getpid(), finished_at=finished,
            keep=self.opt.keep))

    async def _configs(self) -> tuple[str, str]:
        n = len(self.plan.configs)
        for k, config in enumerate(self.plan.configs, 1):
            if self.stop_requested:
                return INTERRUPTED, f"stopped before configuration {k}/{n} ({config.name})"
            assert self.held is not None
            self.held.note_prefix = f"sweep {k}/{n} {config.name}: "
            await self._config(config)
        if self.stop_requested:
            return INTERRUPTED, "stopped after the last configuration's current step"
        return DONE, "done"

    # ------------------------------------------------------------------------------------------------ one config

    def _todo(self, config: SweepConfig) -> list[Cell]:
        prev = self.opt.resume
        if prev is None:
            return list(self.plan.cells)
        rec = prev.config_record(config.name)
        if rec is None or rec.flags != config.flags:
            return list(self.plan.cells)
        done = {c.cell for c in prev.cells if c.config == config.name and c.valid}
        return [c for c in self.plan.cells if c.id not in done]

    async def _config(self, config: SweepConfig) -> None:
        todo = self._todo(config)
        if not todo:
            self._step(config.name, Step("resume", StepStatus.SKIPPED, "every cell valid in the results resumed"))
            return
        if len(todo) < len(self.plan.cells):
            kept = len(self.plan.cells) - len(todo)
            self._step(config.name, Step("resume", StepStatus.DONE, f"{plural(kept, 'valid cell')} kept, "
                                                           f"{len(todo)} to measure"))
        ready = await self._bring_up(config, first=True)
        if not ready:
            return
        if not await self.load.warmup(config):
            self._warmup_failed(config)
            return
        for cell in todo:
            if self.stop_requested:
                return
            rec = await self.load.cell(config, cell, attempt=1)
            if not rec.valid:
                fresh = not await self._still_ready(rec.invocation)
                self._step(config.name, Step("cell", StepStatus.FAILED,
                                             f"{cell.id} invalid ({rec.reason}); retrying once"
                                             + (" on a fresh run" if fresh else "")))
                if fresh and not await self._bring_up(config, first=False):
                    rec = invalid_cell(config.name, cell, 2, rec.reason + "; the configuration did not come back up",
                                   rec.invocation)
                elif fresh and not await self.load.warmup(config):
                    rec = invalid_cell(config.name, cell, 2, rec.reason + "; warmup failed on the fresh run",
                                   rec.invocation)
                else:
                    rec = await self.load.cell(config, cell, attempt=2)
            self.rec.append(rec.to_json())
            if rec.valid:
                self.measured.add((config.name, cell.id))
            self.valid += rec.valid
            self.invalid += not rec.valid
            if not rec.valid and not await self._still_ready(None):
                return  # the retry's run is gone too: the configuration's remaining cells are not measured

    async def _still_ready(self, invocation: str | None) -> bool:
        """The run is up and ready (and, given one, still that invocation)."""
        with contextlib.suppress(TransportError, ManagerError):
            unit = await self.engine.poll_unit()
            same = invocation is None or unit.invocation == invocation
            return same and unit.running and self.engine.state.phase == Phase.READY
        return False

    def _step(self, config: str, s: Step) -> None:
        self.rec.append(StepRecord(config, s.name, s.status, s.detail, s.at).to_json())

    def _restart_step(self, config_name: str, s: Step) -> None:
        """A restart's step, recorded; one whose flags are unchanged (the plan's baseline) says why it restarts all
        the same (issue 51: "flags unchanged", then a restart, with no word on why)."""
        if s.name == "flags" and s.status is StepStatus.SKIPPED:
            s = replace(s, detail=f"{s.detail}; {SAME_FLAGS_WHY}")
        self._step(config_name, s)

    async def _restart(self, config_name: str, argv: Sequence[str]) -> Outcome:
        try:
            out = await protocol.run(self.engine, argv, lambda s: self._restart_step(config_name, s), purpose="sweep",
                                     rollback=False, held=self.held)
        except protocol.RestartError as e:  # observe-only: refused before anything
            raise SweepAborted(str(e)) from None
        if out.result in ENDS_THE_SWEEP:
            raise SweepAborted(f"{config_name}: {out.message}")
        return out

    async def _bring_up(self, config: SweepConfig, *, first: bool) -> bool:
        """The safe restart with the configuration's flags, retried once for a kind worth it; then the check that
        the running command line carries them. Records the configuration (ready or failed)."""
        argv = config.argv(self.original_argv, self.specs)
        attempts = 0
        while True:
            attempts += 1
            t0 = time.time()
            out = await self._restart(config.name, argv)
            self.current = config.name
            if out.ok:
                break
            failure = self.engine.named(out.failure)
            if attempts == 1 and first and _worth_retry(out, failure):
                self._step(config.name, Step("retry", StepStatus.RUNNING, f"{_kind(out, failure)}: worth one more try"))
                continue
            self._config_failed(config, argv, out, failure, attempts)
            return False
        ready_s = round(time.time() - t0, 2)
        running = await self._running_argv()
        missing = config.carried_by(running, self.specs)
        if missing:
            f = FailureInfo("ready", "flags-mismatch", tuple(running), "the running command line lacks "
                            + "; ".join(missing) + ": someone changed the flags, or the manager did not apply them")
            self._record_config(config, argv, out.invocation, "failed", attempts, f, ready_s)
            self.failed.append(config.name)
            return False
        self._record_config(config, running or argv, out.invocation, "ready", attempts, None, ready_s)
        return True

    def _config_failed(self, config: SweepConfig, argv: list[str], out: Outcome, failure: Failure | None,
                       attempts: int) -> None:
        if failure is not None:
            info = FailureInfo(str(failure.phase), str(failure.kind), failure.excerpt, failure.hint)
        else:
            kind = "timeout" if out.result is Result.TIMED_OUT else "failed"
            info = FailureInfo(str(out.phase), kind, (out.message,), "see the steps and `bringup status "
                               f"{self.engine.name}`")
        # the run's whole incident record (timeline against past runs, GPU steps, the way back): one command away
        record = [f"# incident record: {record_command(self.engine.name, out.invocation)}"] if out.invocation else []
        self.rec.write_log(config.name, [f"# {config.name}: {out.message}", f"# argv: {' '.join(argv)}", *record,
                                         *info.excerpt])
        self._record_config(config, argv, out.invocation, "failed", attempts, info, None)
        self.failed.append(config.name)

    def _warmup_failed(self, config: SweepConfig) -> None:
        """Ready, but its warmup got no answer: none of its cells is measured, so the configuration failed (a sweep
        whose every warmup failed said "0 configurations failed" and exited 0)."""
        info = FailureInfo("ready", "warmup", (self.load.warmup_error,), "the server was ready but did not answer "
                           "the sweep's requests: check its endpoint and `bringup bench` against it")
        self._record_config(config, config.argv(self.original_argv, self.specs), self.engine.state.invocation,
                            "failed", 1, info, None)
        self.failed.append(config.name)

    def _record_config(self, config: SweepConfig, argv: Sequence[str], invocation: str, status: str, attempts: int,
                       failure: FailureInfo | None, ready_s: float | None) -> None:
        mem: dict[str, float] = {}
        snap = self.engine.gpus
        if status == "ready" and snap is not None:
            ids = set(self.engine.deployment_gpus(snap))
            mem = {str(g.index): g.mem_used_mib for g in snap.gpus
                   if g.index in ids and g.mem_used_mib is not None}
        self.rec.append(ConfigRecord(config.name, dict(config.flags), tuple(argv), invocation or None, status,
                                     attempts, failure, mem, ready_s, time.time()).to_json())

    async def _running_argv(self) -> list[str]:
        """The command line of the run now up: the manager's record of the process (systemd's ExecStart, the
        process manager's current.json), else the flags it will start with."""
        unit = await self.engine.poll_unit()
        if unit.argv:
            return list(unit.argv)
        return await self.engine.manager.read_argv()

    # ------------------------------------------------------------------------------------------------ the end

    async def _restore(self) -> None:
        """Back to the original flags, or to the best configuration with --keep best."""
        target, name = self.original_argv, "original flags"
        if self.opt.keep == "best":
            best = best_config(self._results())
            cfg = next((c for c in self.plan.configs if c.name == best), None)
            if cfg is not None:
                target, name = cfg.argv(self.original_argv, self.specs), f"best configuration {cfg.name}"
            else:
                self._step(RESTORE, Step("keep", StepStatus.SKIPPED,
                                         "no valid cell: no best configuration; original flags"))
        assert self.held is not None
        self.held.note_prefix = f"sweep: restoring {name}: "
        argv = await self.engine.manager.read_argv()
        unit = await self.engine.poll_unit()
        if argv == list(target) and unit.running and self.engine.state.phase == Phase.READY:
            self._step(RESTORE, Step("restore", StepStatus.SKIPPED, f"already on the {name}, ready"))
            return
        self._step(RESTORE, Step("restore", StepStatus.RUNNING, f"putting the deployment back on the {name}"))
        out = await self._restart(RESTORE, target)
        self._step(RESTORE, Step("restore", StepStatus.DONE if out.ok else StepStatus.FAILED, f"{name}: {out.message}"))


def _kind(out: Outcome, failure: Failure | None) -> str:
    return str(failure.kind) if failure is not None else ("timeout" if out.result is Result.TIMED_OUT else "failed")


def _worth_retry(out: Outcome, failure: Failure | None) -> bool:
    """One more try only where it may go otherwise: a timeout while starting or loading, a (transient) NCCL error,
    or an OOM while the release wait could not prove the GPUs back at baseline. Never bad arguments, nor an OOM
    with the GPUs at baseline (this configuration does not fit), nor a CUDA-graph crash (deterministic)."""
    if out.result is Result.TIMED_OUT and failure is None:
        return out.phase in (Phase.QUEUED, Phase.STARTING, Phase.LOADING, Phase.STOPPED, Phase.UNKNOWN)
    if failure is None:
        return False
    if failure.kind == FailureKind.NCCL:
        return True
    if failure.kind == FailureKind.OOM:
        released = any(s.name == "release" and s.status is StepStatus.DONE for s in out.steps)
        return not released
    return False
