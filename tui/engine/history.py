"""The run history's file, and the engine's hand in it: every bringup of the operator watching a deployment (the
console, the exporter, `status`, `wait`) writes the runs it sees into one file under bringup's own state dir, and
reads its ETA from it.

The file is the operator's, on the machine bringup runs on (never the server's host, even over SSH):
`STATE_DIR/deployments/NAME/history.json`. Writers take an exclusive `flock` on `history.lock` beside it, read the
file, merge their record into the run of the same invocation (tui/lifecycle/history.py `upsert`: never a second
record of one run, never one lost to another writer) and replace the file atomically (a temporary file, fsync,
rename), so a reader never sees half a file and a crash never leaves one. Reads take no lock; they are cached by
the file's mtime and size, since every snapshot reads the ETA.

The file, its temporary and its lock are written the one way bringup writes a file (tui/guard/files.py: no link
followed, 0600 in a 0700 directory). A record that does not read back (a number that is none, a wrong type) is
skipped with a note (`HistoryStore.notes`), and one that would not read back is never written. The engine's writes
happen off its event loop (`RunRecorder`): a rewrite of the file at each change of phase took 3.5 s of the loop
with big records, time when no key, line or probe was handled.
"""

from __future__ import annotations

import asyncio
import fcntl
import getpass
import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from tui.config.deployments import DeploymentConfig
from tui.guard.files import open_private, write_private
from tui.guard.numbers import BadNumber
from tui.lifecycle.eta import estimate
from tui.lifecycle.history import Observed, failed_before, options, previous_of, record_of, upsert
from tui.lifecycle.lines import latest_progress
from tui.lifecycle.reducer import LifecycleState
from tui.lifecycle.run_record import ActionRecord, GpuStep, RunRecord, checked, read_records, to_dict
from tui.lifecycle.state import BEFORE_READY, FailedRun
from tui.model import Failure, GpuSnapshot, LockInfo, NoEta, Phase, PhaseEta

from .gpus import GpuTracker


class Watched(Protocol):
    """What the recorder reads of the engine that watches the run: a narrow view, so this module imports no
    engine (the engine calls it; nothing here calls back into it)."""

    @property
    def name(self) -> str: ...
    @property
    def host_name(self) -> str: ...
    @property
    def dep(self) -> DeploymentConfig: ...
    @property
    def state(self) -> LifecycleState: ...
    @property
    def gpus(self) -> GpuSnapshot | None: ...
    @property
    def gpu(self) -> GpuTracker: ...
    @property
    def other_holder(self) -> LockInfo | None: ...
    def named(self, failure: Failure | None) -> Failure | None: ...

FILE = "history.json"
LOCK = "history.lock"
#: the file's form: a newer bringup's file with another form is read as far as it can be, and rewritten as this
FORMAT = 1


def history_path(state_dir: Path, deployment: str) -> Path:
    return state_dir / "deployments" / deployment / FILE


@dataclass
class HistoryStore:
    """One deployment's history file: `runs()` to read, `put()` to write a run's record."""

    path: Path
    _cache: tuple[tuple[int, int], list[RunRecord]] | None = field(default=None, repr=False)
    #: the records of the file last read that were skipped, and why (one line each)
    notes: tuple[str, ...] = ()

    def runs(self) -> list[RunRecord]:
        """The runs on record, oldest first; none when there is no file yet (or it cannot be read)."""
        try:
            st = self.path.stat()
        except OSError:
            return []
        key = (st.st_mtime_ns, st.st_size)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        runs = self._read()
        self._cache = (key, runs)
        return runs

    def _read(self) -> list[RunRecord]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        items = data.get("runs", []) if isinstance(data, dict) else []
        runs, self.notes = read_records(items if isinstance(items, list) else [])
        return runs

    def put(self, record_for: Callable[[Sequence[RunRecord]], RunRecord | None]) -> RunRecord | None:
        """Under the lock: read the runs, make the record from them (its diff is against the run before it, as
        now on record), merge it in and write the file. Returns the record as merged."""
        lock = open_private(self.path.parent / LOCK, os.O_RDWR)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            runs = self._read()
            record = record_for(runs)
            if record is None:
                return None
            try:
                record = checked(record)
            except BadNumber as e:  # never written: every later reader would skip it (or, before, crash on it)
                self.notes = (*self.notes, f"run {record.invocation[:12]} not recorded: {e}")
                return None
            runs = upsert(runs, record)
            self._write(runs)
            return next((r for r in runs if r.invocation == record.invocation), record)
        finally:
            os.close(lock)  # the lock goes with the descriptor

    def _write(self, runs: Sequence[RunRecord]) -> None:
        # allow_nan=False: a non-finite number is an error here, never an `Infinity` in the file
        text = json.dumps({"format": FORMAT, "runs": [to_dict(r) for r in runs]}, indent=None, allow_nan=False)
        write_private(self.path, text, durable=True)


def who() -> str:
    """`user@host pid N`: the bringup that acted."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


#: how long after an action a GPU sample may still stand for the memory at it (a stop's row read after the stop
#: said 0.0 GiB though the run had just held 507.8 GiB: issue 51)
LEAD_IN_READING_S = 1.0


class RunRecorder:
    """The engine's hook: the current run's record written at each change of its phase picture, with the GPU
    memory at each step (the actions that led to the run, then its phases) and the actions taken on it; and the
    ETA read back. A file that cannot be written never stops the engine: the error is kept and said with the ETA."""

    def __init__(self, store: HistoryStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.error = ""
        #: what "the same flags" means for the ETA: the flags one key of the preset sets at once (one change), and
        #: the deployment's `hide_flags` (not compared, as the command line does not show them); set by the engine
        self.together: tuple[frozenset[str], ...] = ()
        self.hidden: tuple[str, ...] = ()
        #: the newest view of the run not yet written, and the task writing (off the loop, in a thread)
        self._pending: Observed | None = None
        self._writer: asyncio.Task[None] | None = None
        #: steps and actions taken before the run they lead to exists (a restart's stop, its release wait)
        self._lead_in: list[tuple[GpuStep, ActionRecord | None]] = []
        self._invocation = ""
        self._steps: list[GpuStep] = []
        self._actions: list[ActionRecord] = []

    def _gpu_step(self, e: Watched, step: str) -> GpuStep:
        snap = e.gpus
        used = e.gpu.deployment_memory_mib(snap) if snap is not None else None
        att = e.gpu.attribution(running=e.state.unit is not None and e.state.unit.running)
        return GpuStep(self.clock(), step, used, att.current_mib if att else None,
                       att.previous_mib if att else None, att.other_mib if att else None)

    def acted(self, e: Watched, action: str) -> None:
        """The operator (or a restart) asked for `action`: its moment and the memory then, for the run it leads to
        (a stop belongs to what follows it as much as to what it ends)."""
        act = ActionRecord(self.clock(), who(), action)
        step = self._gpu_step(e, action)
        if action == "stop" and step.this_run_mib:
            # the row is the next run's: the run being stopped is the run before it, as the record's header says
            step = replace(step, previous_run_mib=(step.previous_run_mib or 0.0) + step.this_run_mib,
                           this_run_mib=0.0)
        self._lead_in = [*self._lead_in, (step, act)][-20:]
        if e.state.invocation and e.state.phase not in (Phase.STOPPED, Phase.FAILED):
            self._actions.append(act)  # a stop of the run under way is its own action too
            self._changed(e)

    def gpus_seen(self, e: Watched) -> None:
        """A GPU sample: an action taken before the first one (a restart's stop, right after its engine started)
        gets the memory of the first one after it, who held what as near the step as was seen."""
        if self._lead_in and self._lead_in[-1][0].used_mib is None:
            step, act = self._lead_in[-1]
            snap = e.gpus
            if snap is None or snap.at - step.at > LEAD_IN_READING_S:
                return  # read after the step was done (a stop's 0 once it stopped): not the step's, left unread
            seen = self._gpu_step(e, step.step)
            self._lead_in[-1] = (replace(seen, at=step.at), act)

    def changed(self, e: Watched) -> None:
        """The phase picture changed: write the run's record."""
        self._changed(e)

    def _changed(self, e: Watched) -> None:
        s = e.state
        if not s.invocation or not s.timeline or s.invocation_started is None:
            return
        if s.invocation != self._invocation:
            self._invocation = s.invocation
            self._steps = [st for st, _ in self._lead_in if st.at >= s.invocation_started - 600]
            self._actions = [a for _, a in self._lead_in if a is not None and a.at >= s.invocation_started - 600]
            self._lead_in = []
        # a hang's memory is what it holds when it stalls, not what it held when its phase began
        mark = "stalled" if s.stalled_for is not None else str(s.phase)
        if not self._steps or self._steps[-1].step != mark:
            step = self._gpu_step(e, mark)
            if step.used_mib is not None:  # a phase read back before any GPU sample has no memory to tell
                self._steps.append(step)
        if e.other_holder is not None:
            h = e.other_holder
            act = ActionRecord(h.since, f"{h.who} pid {h.pid}", h.purpose, h.change)
            if act not in self._actions:
                self._actions.append(act)
        unit = e.state.unit
        observed = Observed(
            deployment=e.name, invocation=s.invocation, started_at=s.invocation_started,
            argv=tuple(unit.argv) if unit is not None else (), timeline=s.timeline, phase=s.phase, now=self.clock(),
            failure=e.named(s.failure), release=s.release.version if s.release is not None else "",
            host=e.host_name, unit=e.dep.what_runs,
            gpu_used_mib=self._steps[-1].used_mib if self._steps else None,
            gpu_steps=tuple(self._steps), actions=tuple(self._actions),
            stalled_since=s.last_progress if s.stalled_for is not None else None,
            last_line=latest_progress(s.blocks.tail))
        self._pending = observed
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a script, a test): written here and now
            self._write_pending()
            return
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._drain(), name="bringup-history")

    async def _drain(self) -> None:
        """Write the newest view in a thread until none is pending: views that came meanwhile are one write (each
        view holds all of the run that the ones before it held)."""
        while self._pending is not None:
            await asyncio.to_thread(self._write_pending)

    def _write_pending(self) -> None:
        observed, self._pending = self._pending, None
        if observed is None:
            return
        try:
            self.store.put(lambda runs: record_of(observed, previous_of(runs, observed.invocation,
                                                                        observed.started_at)))
            self.error = ""
        except OSError as err:
            self.error = f"history {self.store.path}: {err.strerror or err}"
        except ValueError as err:  # a number json will not write (allow_nan=False): the record is not kept
            self.error = f"history {self.store.path}: {err}"

    async def flush(self) -> None:
        """Wait for the writes under way and pending (an engine closing: a `wait` that exits has its run on
        record). Bounded by the caller."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)
        if self._pending is not None:
            await asyncio.to_thread(self._write_pending)

    def eta(self, deployment: str, s: LifecycleState, latest_line: str, now: float) -> PhaseEta | NoEta | None:
        """The ETA of the run `s` is of at `now` (None when no run is starting)."""
        if s.phase not in BEFORE_READY:  # a queued run's too: its queue time from the history
            return None
        if s.stalled_for is not None and s.last_progress is not None:
            # a countdown through a hang grows a second every second: once stalled, no ready-time is promised
            since = time.strftime("%H:%M:%S", time.localtime(s.last_progress))
            return NoEta(f"no ETA: stalled since {since} (no progress in {s.phase} for {s.stalled_for:.0f} s)")
        if self.error:
            return NoEta(f"no ETA: {self.error}")
        argv = s.unit.argv if s.unit is not None else ()
        return estimate(self.store.runs(), deployment=deployment, invocation=s.invocation, flags=options(argv),
                        phase=s.phase, timeline=s.timeline, now=now, latest_line=latest_line,
                        together=self.together, hidden=self.hidden, line_at=s.last_progress)

    def last_release(self) -> str:
        """The release the deployment's last run on record said ("" for none, or a history that cannot be read)."""
        try:
            return next((r.release for r in reversed(self.store.runs()) if r.release), "")
        except (OSError, ValueError):
            return ""

    def earlier(self, s: LifecycleState) -> tuple[FailedRun, ...]:
        """The runs on record that failed one after another before the current run, for a watch that saw none of
        them (`status` during a crash loop): the history knows them if any bringup watched them fail."""
        if s.earlier or not s.invocation or s.invocation_started is None or s.phase == Phase.READY:
            return s.earlier
        return failed_before(self.store.runs(), s.invocation, s.invocation_started)

    def on_entry(self, deployment: str, s: LifecycleState, phase: Phase, at: float) -> PhaseEta | NoEta | None:
        """The ETA as it stood when the run entered `phase` at `at` (a wait's phase line, read back or live)."""
        if phase not in BEFORE_READY:
            return None
        if s.stalled_for is not None and phase == s.phase:
            return self.eta(deployment, s, "", s.now)  # stalled now: no promise made when the phase began
        timeline = tuple(t for t in s.timeline if t.at <= at)
        if not timeline or timeline[-1].phase != phase:
            return None
        if self.error:
            return NoEta(f"no ETA: {self.error}")
        argv = s.unit.argv if s.unit is not None else ()
        return estimate(self.store.runs(), deployment=deployment, invocation=s.invocation, flags=options(argv),
                        phase=phase, timeline=timeline, now=at, together=self.together, hidden=self.hidden)
