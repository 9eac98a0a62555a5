"""`bringup exporter`: the engines' truth as Prometheus metrics.

The fleet (tui/engine/fleet.py) runs headless, one engine per deployment, and a custom collector turns their
snapshots into metric families at scrape time: nothing is kept twice, and a scrape sees exactly what `bringup
status` would say at that moment. `prometheus_client` serves and formats them (no hand-written exposition); its
HTTP server answers in a thread of its own, and the collector hands the reading of the engines to the event loop
that runs them, so a scrape never reads an engine halfway through an update.

Two things are kept here. The failure counter: a counter must count failures as they happen, by invocation, never
twice for one run, and must not go down when the run is restarted and its failure is gone from the snapshot. And
the restarts: the exporter restarts nothing, but every bringup that restarts a deployment holds its lock, with a
record of who, why and since when, and its latest step, from the first step until ready or failed (the lock read
every 2 s: a restart shorter than that can be missed). A holder whose purpose is a restart is counted when it lets
go, with how long it held the lock, and its outcome is the phase the exporter's own engine then reaches, ready or
failed. A sweep holds the lock once for all its configurations and restarts each under it, its record's step
starting `sweep K/N NAME: ` (`sweep: restoring NAME: ` for the flags it ends on): each of those restarts is counted
from the record's changes, from the first step seen of it to its `follow: ready` or `follow: failed` (so its
duration is known to within the 2 s); one whose outcome the record never showed (the next one began within the 2 s,
or it timed out) takes the engine's phase at that moment, or `other`.
And the data age: each source's last good reading is kept, so that a source that stops answering shows a growing
age (and its last figures) rather than no series.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import shlex
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial

from prometheus_client import ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from tui.engine.core import Engine
from tui.engine.fleet import Fleet
from tui.engine.updates import GpusSampled, HolderChanged, Update
from tui.guard.redact import scrub
from tui.lifecycle.nodes import describe_gpus, host_names
from tui.lifecycle.release import attribute
from tui.lifecycle.secrets import redact_argv
from tui.model import FailureKind, GpuSnapshot, LockInfo, Phase, PhaseEta, UnitState

#: a failure whose cause is still arriving (the traceback after an exit) is counted once it is known, or this long
#: after it was first seen, whichever comes first: one count, of the right kind
FAILURE_SETTLE_S = 2.5
#: a scrape waits at most this long for the event loop to read the engines
SCRAPE_TIMEOUT_S = 5.0
MIB = 1024 * 1024
OWNERS = ("this_run", "previous_run", "other")
SOURCES = ("unit", "gpus", "metrics")
#: a restart's outcome: the phase its run reached once the lock was let go (`other`: neither within the time below)
OUTCOMES = ("ready", "failed", "other")
#: how long after the lock is let go the outcome may take to show in the exporter's own engine (its own probe)
OUTCOME_WAIT_S = 30.0
#: restart durations, seconds: a fast restart of a small model to a 548 GB one that waits minutes for its memory
RESTART_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0)
#: a sweep's lock record: which of its restarts a step belongs to (`sweep 2/4 NAME: ...`, `sweep: restoring NAME: `)
_SWEEP_STEP = re.compile(r"sweep(?: (\d+/\d+) |: restoring )")
#: ... and the step that ends one (restart.py's `follow` step: `ready...`, `failed...`)
_SWEEP_END = re.compile(r": follow: (ready|failed)\b")
#: the `flags` label of bringup_info: the run's command line from its first option, at most this long
FLAGS_MAX = 1024


@dataclass
class _Seen:
    """Per deployment: the failures counted (by invocation), and since when the current phase has held."""

    counted: set[str] = field(default_factory=set)
    failures: dict[str, int] = field(default_factory=lambda: {k.value: 0 for k in FailureKind})
    phase: Phase | None = None
    since: float = 0.0
    #: the restart in progress (another bringup holds the lock for one), and one let go whose outcome is awaited
    restarting: LockInfo | None = None
    #: a restart over (start, end), whose outcome the exporter's engine is awaited for
    ended: tuple[float, float] | None = None
    #: the sweep holding the lock, and which of its restarts is followed (its key, since when, outcome seen)
    sweep: LockInfo | None = None
    step_key: str = ""
    step_since: float = 0.0
    step_done: bool = True
    #: each source's last good reading (time), and the last GPU sample that had GPUs in it
    good_at: dict[str, float] = field(default_factory=dict)
    good_gpus: GpuSnapshot | None = None
    restarts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    durations: list[float] = field(default_factory=list)

    def bucket_counts(self) -> list[tuple[str, float]]:
        out = [(f"{b:g}", float(sum(d <= b for d in self.durations))) for b in RESTART_BUCKETS]
        return [*out, ("+Inf", float(len(self.durations)))]


class FleetCollector(Collector):
    """Yields the fleet's metric families at scrape time. `loop`: the event loop running the engines; a scrape
    from another thread (the HTTP server's) reads them there."""

    def __init__(self, fleet: Fleet, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.fleet = fleet
        self.loop = loop
        self._seen: dict[str, _Seen] = {name: _Seen() for name in fleet.engines}
        for name, engine in fleet.engines.items():
            engine.watch_holders = True  # others' restarts are counted by their lock records
            engine.subscribe(partial(self._on_update, name, engine))

    # ------------------------------------------------------------------ failures, as they happen

    def _on_update(self, name: str, engine: Engine, update: Update) -> None:
        now = time.time()
        self.note_failure(name, engine, now)
        if isinstance(update, HolderChanged):
            self.note_holder(name, engine, update.holder, now)
        elif isinstance(update, GpusSampled):
            self.note_sources(name, engine)
        self.note_outcome(name, engine, now)

    def note_holder(self, name: str, engine: Engine, holder: LockInfo | None, now: float) -> None:
        """Another bringup's lock record, as read: a restart followed until it lets go; a sweep's restarts
        followed by its record's steps."""
        seen = self._seen[name]
        was = seen.restarting
        if was is not None and (holder is None or holder.token != was.token):
            seen.ended, seen.restarting = (was.since, now), None
        if seen.sweep is not None and (holder is None or holder.token != seen.sweep.token):
            if not seen.step_done:  # let go during one of its restarts: its outcome is the engine's, awaited
                seen.ended = (seen.step_since, now)
            seen.sweep, seen.step_key, seen.step_done = None, "", True
        if holder is None:
            return
        if holder.purpose.startswith("restart") and seen.restarting is None:
            seen.restarting = holder
        elif holder.purpose.startswith("sweep"):
            first = seen.sweep is None
            seen.sweep = holder
            self._sweep_step(seen, engine, holder.step, now, first)

    def _sweep_step(self, seen: _Seen, engine: Engine, step: str, now: float, first: bool) -> None:
        m = _SWEEP_STEP.match(step)
        if m is None:  # no restart's step yet (the sweep's own steps are not in its record)
            return
        key, rest = m[1] or "restore", step[m.end():]
        end = _SWEEP_END.search(rest)
        if first:  # the exporter came in during the sweep: a restart already over is not counted, nor timed
            seen.step_key, seen.step_since, seen.step_done = key, now, end is not None
            return
        if key != seen.step_key or (seen.step_done and ": follow: " not in rest):  # the next restart began
            if not seen.step_done:  # the previous one's outcome never showed in the record: the engine's now
                self._count(seen, _phase_outcome(engine), now - seen.step_since)
            seen.step_key, seen.step_since, seen.step_done = key, now, False
        if end is not None and not seen.step_done:
            self._count(seen, end[1], now - seen.step_since)
            seen.step_done = True

    @staticmethod
    def _count(seen: _Seen, outcome: str, duration: float) -> None:
        seen.restarts[outcome] += 1
        seen.durations.append(max(0.0, duration))

    def note_outcome(self, name: str, engine: Engine, now: float) -> None:
        """A restart let go of the lock: counted once its run is ready or failed here (or after OUTCOME_WAIT_S)."""
        seen = self._seen[name]
        if seen.ended is None:
            return
        since, ended_at = seen.ended
        outcome = _phase_outcome(engine)
        if outcome == "other" and now - ended_at < OUTCOME_WAIT_S:
            return
        seen.ended = None
        self._count(seen, outcome, ended_at - since)

    def note_sources(self, name: str, engine: Engine) -> None:
        """Each source's last good reading: kept here, since the engine's own latest may be a failed one."""
        seen = self._seen[name]
        gpus = engine.gpus
        if gpus is not None and gpus.gpus and (
                seen.good_gpus is None or gpus.at >= seen.good_gpus.at):
            seen.good_gpus = gpus
            seen.good_at["gpus"] = gpus.at
        for source, at in (("unit", engine.unit_seen_at),
                           ("metrics", engine.throughput.at if engine.throughput is not None else None)):
            if at is not None:
                seen.good_at[source] = max(at, seen.good_at.get(source, at))

    def note_failure(self, name: str, engine: Engine, now: float) -> None:
        """Count the engine's current failure once for its run, when its kind is known (or has had its time)."""
        st = engine.state
        failure = st.failure
        if failure is None:
            return
        seen = self._seen[name]
        key = st.invocation or f"at {failure.at}"
        if key in seen.counted:
            return
        settling = st.failure_open or st.failure_is_exit
        if settling and now - failure.at < FAILURE_SETTLE_S:
            return
        seen.counted.add(key)
        seen.failures[failure.kind.value] = seen.failures.get(failure.kind.value, 0) + 1

    # ------------------------------------------------------------------ the scrape

    def collect(self) -> Iterable[Metric]:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop is running or loop.is_closed():
            return self.families(time.time())
        fut: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def read() -> None:
            try:
                fut.set_result(self.families(time.time()))
            except Exception as e:  # the scrape says so (HTTP 500) rather than hang
                fut.set_exception(e)
        loop.call_soon_threadsafe(read)
        return fut.result(timeout=SCRAPE_TIMEOUT_S)

    def families(self, now: float) -> list[Metric]:
        phase = GaugeMetricFamily("bringup_phase", "1 for the deployment's current lifecycle phase, 0 for the others",
                                  labels=["deployment", "host", "phase"])
        phase_s = GaugeMetricFamily("bringup_phase_seconds", "Seconds the deployment has been in its current phase",
                                    labels=["deployment"])
        ready = GaugeMetricFamily("bringup_ready", "1 when the deployment is ready (a real generation answered)",
                                  labels=["deployment"])
        stalled = GaugeMetricFamily("bringup_stalled", "1 when a start has made no progress (no log line, no GPU "
                                    "memory change) for the stall threshold", labels=["deployment"])
        failures = CounterMetricFamily("bringup_failures", "Failures seen, by kind: one per failed run",
                                       labels=["deployment", "kind"])
        gpu_mem = GaugeMetricFamily("bringup_gpu_memory_bytes", "GPU memory on the deployment's GPUs by owner: this "
                                    "run's processes, the previous (dead) run's, or others'",
                                    labels=["deployment", "gpu", "owner"])
        probe = GaugeMetricFamily("bringup_probe_latency_seconds", "Latency of the last readiness probe of the "
                                  "current run", labels=["deployment"])
        age = GaugeMetricFamily("bringup_data_age_seconds", "Seconds since each source last gave a good reading "
                                "(unit state, GPU sample, throughput): it keeps growing while the source fails; none "
                                "for a source that never answered (bringup_source_up says so)",
                                labels=["deployment", "source"])
        source_up = GaugeMetricFamily("bringup_source_up", "1 when the source's latest reading succeeded, 0 while it "
                                      "fails or has never answered (unit state, GPU sample, throughput)",
                                      labels=["deployment", "source"])
        info = GaugeMetricFamily("bringup_info", "The deployment's current run: host, preset, invocation, manager, "
                                 "and flags: the run's command line from its first option (shell-quoted, at most "
                                 f"{FLAGS_MAX} characters), which changes only with the invocation (a new run), so "
                                 "the series count is that of the invocation label; release: the server's release "
                                 "as it said it (its log or its HTTP answer), empty until it has: at most one more "
                                 "series a run",
                                 labels=["deployment", "host", "preset", "invocation", "manager", "flags", "release"])
        tokens = GaugeMetricFamily("bringup_generation_tokens_per_second", "Generation throughput of the deployment "
                                   "while ready, tokens/s, as bringup reads it (the server's /metrics, else its log "
                                   "lines); none when not ready or not read yet", labels=["deployment"])
        up = GaugeMetricFamily("bringup_up", "1 when the deployment's host answers and its state is current",
                               labels=["deployment"])
        restarts = CounterMetricFamily("bringup_restarts", "Restarts by any bringup (seen by the deployment's lock), "
                                       "by the phase their run reached: ready, failed or other",
                                       labels=["deployment", "outcome"])
        restart_s = HistogramMetricFamily("bringup_restart_duration_seconds", "How long each restart held the "
                                          "deployment's lock, from its first step to ready or failed",
                                          labels=["deployment"])
        eta = GaugeMetricFamily("bringup_phase_eta_seconds", "Expected seconds left while a run starts, from the "
                                "deployment's past runs (the history every bringup of this operator shares): until "
                                "the current phase ends, and until ready; match: same-flags, or one-flag-apart when "
                                "no past run had these flags; none without past runs to go by (no guess)",
                                labels=["deployment", "until", "match"])
        for view in self.fleet.views(now):
            snap = view.snapshot
            name = snap.deployment
            engine = self.fleet.engines[name]
            self.note_failure(name, engine, now)
            self.note_outcome(name, engine, now)
            self.note_sources(name, engine)
            seen = self._seen[name]
            if snap.phase != seen.phase:
                last = snap.timeline[-1] if snap.timeline else None
                seen.phase = snap.phase
                seen.since = last.at if last is not None and last.phase == snap.phase else now
            for p in Phase:
                phase.add_metric([name, snap.host, p.value], 1.0 if p == snap.phase else 0.0)
            phase_s.add_metric([name], max(0.0, now - seen.since))
            ready.add_metric([name], 1.0 if snap.phase == Phase.READY else 0.0)
            stalled.add_metric([name], 1.0 if snap.stalled_for is not None else 0.0)
            for kind, n in sorted(seen.failures.items()):
                failures.add_metric([name, kind], n)
            good = seen.good_gpus  # the last good sample: stale while the source fails, as its age says
            names = host_names(good.gpus) if good is not None else ()
            for gpu, owners in _gpu_owners(engine, good):
                for owner, mib in zip(OWNERS, owners, strict=True):  # `node-b:3` on a deployment over nodes
                    gpu_mem.add_metric([name, describe_gpus([gpu], names), owner], mib * MIB)
            last_probe = engine.current_probe()
            if last_probe is not None and last_probe.latency_s is not None:
                probe.add_metric([name], last_probe.latency_s)
            for source in SOURCES:
                at = seen.good_at.get(source)
                if at is not None:
                    age.add_metric([name, source], max(0.0, now - at))
                source_up.add_metric([name, source], 1.0 if at is not None and not _failing(engine, source) else 0.0)
            unit = snap.unit
            info.add_metric([name, snap.host, engine.preset.name, snap.invocation or (unit.invocation if unit else ""),
                             engine.dep.manager, flags_label(unit),
                             snap.release_seen.version if snap.release_seen is not None else ""], 1.0)
            tp = engine.throughput
            if snap.phase == Phase.READY and tp is not None and tp.tokens_per_s is not None:
                tokens.add_metric([name], tp.tokens_per_s)
            if isinstance(snap.eta, PhaseEta):
                eta.add_metric([name, "phase", str(snap.eta.basis.match)], snap.eta.phase_left_s)
                eta.add_metric([name, "ready", str(snap.eta.basis.match)], snap.eta.ready_left_s)
            up.add_metric([name], 0.0 if view.host_down or snap.stale else 1.0)
            for outcome in OUTCOMES:
                restarts.add_metric([name, outcome], seen.restarts[outcome])
            restart_s.add_metric([name], seen.bucket_counts(), sum(seen.durations))
        return _scrubbed([phase, phase_s, ready, stalled, failures, gpu_mem, probe, age, source_up, info, up, restarts,
                          restart_s, tokens, eta])


def _scrubbed(families: list[Metric]) -> list[Metric]:
    """Every label value through the one redactor (tui/guard/redact.py): a scrape is read by whoever reaches the
    port, and a label may carry a server's words or a flag's value (`bringup_info{flags}`)."""
    for fam in families:
        fam.samples = [smp._replace(labels={k: scrub(v) for k, v in smp.labels.items()}) for smp in fam.samples]
    return families


def _phase_outcome(engine: Engine) -> str:
    phase = engine.state.phase
    return "ready" if phase == Phase.READY else "failed" if phase == Phase.FAILED else "other"


def _failing(engine: Engine, source: str) -> bool:
    """The source's latest attempt failed (the engine files its collectors' errors by these names)."""
    return source in engine.collector_errors or (source == "gpus" and engine.gpus is not None
                                                 and bool(engine.gpus.error) and not engine.gpus.gpus)


def flags_label(unit: UnitState | None) -> str:
    """The run's flags as one shell-quoted command line: its argv from the first option on (the program and the
    interpreter before it are the preset's, not flags), secrets' values as `***` (tui/lifecycle/secrets.py), cut at
    FLAGS_MAX characters (ending in `...`)."""
    argv = unit.argv if unit is not None else ()
    first = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    text = shlex.join(redact_argv(argv[first:]))  # a scrape is read by whoever reaches the port: no secret in it
    return text if len(text) <= FLAGS_MAX else text[:FLAGS_MAX - 3] + "..."


def _gpu_owners(engine: Engine, snap: GpuSnapshot | None) -> Iterator[tuple[int, tuple[float, float, float]]]:
    """Per GPU of the deployment: MiB of this run, the previous run and others, from the last good GPU sample."""
    if snap is None or not snap.gpus:
        return
    unit = engine.state.unit
    running = unit is not None and unit.running
    for gpu in engine.deployment_gpus(snap):
        a = attribute(snap, [gpu], engine.run_pids, engine.previous_pids, running=running)
        yield gpu, (a.current_mib, a.previous_mib, a.other_mib)


def registry_for(fleet: Fleet, loop: asyncio.AbstractEventLoop | None = None) -> CollectorRegistry:
    """A registry of the fleet's metrics and the exporter process's own (CPU, memory)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(fleet, loop))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_memory_bytes: its own cost
    return registry
