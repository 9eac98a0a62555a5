"""`bringup exporter`: the engines' truth as Prometheus metrics.

The fleet (tui/engine/fleet.py) runs headless, one engine per deployment, and a custom collector turns their
snapshots into metric families at scrape time: nothing is kept twice, and a scrape sees exactly what `bringup
status` would say at that moment. `prometheus_client` serves and formats them (no hand-written exposition); its
HTTP server answers in a thread of its own, and the collector hands the reading of the engines to the event loop
that runs them, so a scrape never reads an engine halfway through an update.

Two things are kept here. The failure counter: a counter must count failures as they happen, by invocation, never
twice for one run, and must not go down when the run is restarted and its failure is gone from the snapshot. And
the restarts: the exporter restarts nothing, but every bringup that restarts a deployment holds its lock, with a
record of who, why and since when, from the first step until ready or failed. A holder whose purpose is a restart
is seen (the lock read every 2 s: a restart shorter than that can be missed); when it lets go, the restart is
counted with its duration, and its outcome is the phase the exporter's own engine then reaches, ready or failed
(what the restart itself said is not to be known from here).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial

from prometheus_client import ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from tui.engine.core import Engine
from tui.engine.fleet import Fleet
from tui.engine.updates import HolderChanged, Update
from tui.lifecycle.nodes import describe_gpus, host_names
from tui.lifecycle.release import attribute
from tui.model import FailureKind, LockInfo, Phase

DEFAULT_LISTEN = "127.0.0.1:9464"
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


class ListenError(ValueError):
    """A --listen that cannot be used as given: the message says why, in one line."""


def parse_listen(text: str, allow_remote: bool = False) -> tuple[str, int]:
    """HOST:PORT (an IPv6 address in brackets) -> (host, port). Anything but a loopback address is refused unless
    `allow_remote`: the metrics name every deployment, host and run, and the exporter has no authentication."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ListenError(f"--listen takes HOST:PORT, not {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        raise ListenError(f"--listen: the port must be a number, not {port_text!r}") from None
    if not 0 < port < 65536:
        raise ListenError(f"--listen: port {port} is out of range (1-65535)")
    if not allow_remote and not is_loopback(host):
        raise ListenError(f"--listen {text}: refusing a non-loopback address, the metrics have no authentication "
                          "and name every deployment and run (pass --allow-remote to serve it anyway)")
    return host, port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: which address it binds to is not ours to know
        return False


@dataclass
class _Seen:
    """Per deployment: the failures counted (by invocation), and since when the current phase has held."""

    counted: set[str] = field(default_factory=set)
    failures: dict[str, int] = field(default_factory=lambda: {k.value: 0 for k in FailureKind})
    phase: Phase | None = None
    since: float = 0.0
    #: the restart in progress (another bringup holds the lock for one), and one let go whose outcome is awaited
    restarting: LockInfo | None = None
    ended: tuple[LockInfo, float] | None = None
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
            self.note_holder(name, update.holder, now)
        self.note_outcome(name, engine, now)

    def note_holder(self, name: str, holder: LockInfo | None, now: float) -> None:
        seen = self._seen[name]
        was = seen.restarting
        if was is not None and (holder is None or holder.token != was.token):
            seen.ended, seen.restarting = (was, now), None
        if holder is not None and holder.purpose.startswith("restart") and seen.restarting is None:
            seen.restarting = holder

    def note_outcome(self, name: str, engine: Engine, now: float) -> None:
        """A restart let go of the lock: counted once its run is ready or failed here (or after OUTCOME_WAIT_S)."""
        seen = self._seen[name]
        if seen.ended is None:
            return
        holder, ended_at = seen.ended
        phase = engine.state.phase
        outcome = "ready" if phase == Phase.READY else "failed" if phase == Phase.FAILED else ""
        if not outcome and now - ended_at < OUTCOME_WAIT_S:
            return
        seen.ended = None
        seen.restarts[outcome or "other"] += 1
        seen.durations.append(max(0.0, ended_at - holder.since))

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
        age = GaugeMetricFamily("bringup_data_age_seconds", "Seconds since each source last answered (unit state, "
                                "GPU sample, throughput)", labels=["deployment", "source"])
        info = GaugeMetricFamily("bringup_info", "The deployment's current run: host, preset, invocation, manager",
                                 labels=["deployment", "host", "preset", "invocation", "manager"])
        up = GaugeMetricFamily("bringup_up", "1 when the deployment's host answers and its state is current",
                               labels=["deployment"])
        restarts = CounterMetricFamily("bringup_restarts", "Restarts by any bringup (seen by the deployment's lock), "
                                       "by the phase their run reached: ready, failed or other",
                                       labels=["deployment", "outcome"])
        restart_s = HistogramMetricFamily("bringup_restart_duration_seconds", "How long each restart held the "
                                          "deployment's lock, from its first step to ready or failed",
                                          labels=["deployment"])
        for view in self.fleet.views(now):
            snap = view.snapshot
            name = snap.deployment
            engine = self.fleet.engines[name]
            self.note_failure(name, engine, now)
            self.note_outcome(name, engine, now)
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
                failures.add_metric([name, kind], float(n))
            names = host_names(engine.gpus.gpus) if engine.gpus is not None else ()
            for gpu, owners in _gpu_owners(engine):
                for owner, mib in zip(OWNERS, owners, strict=True):  # `node-b:3` on a deployment over nodes
                    gpu_mem.add_metric([name, describe_gpus([gpu], names), owner], mib * MIB)
            last_probe = engine.current_probe()
            if last_probe is not None and last_probe.latency_s is not None:
                probe.add_metric([name], last_probe.latency_s)
            for source, at in _ages(engine):
                if at is not None:
                    age.add_metric([name, source], max(0.0, now - at))
            unit = snap.unit
            info.add_metric([name, snap.host, engine.preset.name, snap.invocation or (unit.invocation if unit else ""),
                             engine.dep.manager], 1.0)
            up.add_metric([name], 0.0 if view.host_down or snap.stale else 1.0)
            for outcome in OUTCOMES:
                restarts.add_metric([name, outcome], float(seen.restarts[outcome]))
            restart_s.add_metric([name], seen.bucket_counts(), sum(seen.durations))
        return [phase, phase_s, ready, stalled, failures, gpu_mem, probe, age, info, up, restarts, restart_s]


def _gpu_owners(engine: Engine) -> Iterator[tuple[int, tuple[float, float, float]]]:
    """Per GPU of the deployment: MiB of this run, the previous run and others, from the newest GPU sample."""
    snap = engine.gpus
    if snap is None or not snap.gpus:
        return
    unit = engine.state.unit
    running = unit is not None and unit.running
    for gpu in engine.deployment_gpus(snap):
        a = attribute(snap, [gpu], engine.run_pids, engine.previous_pids, running=running)
        yield gpu, (a.current_mib, a.previous_mib, a.other_mib)


def _ages(engine: Engine) -> Iterator[tuple[str, float | None]]:
    yield "unit", engine.unit_seen_at
    gpus = engine.gpus
    yield "gpus", gpus.at if gpus is not None and gpus.gpus else None
    tp = engine.throughput
    yield "metrics", tp.at if tp is not None else None


def registry_for(fleet: Fleet, loop: asyncio.AbstractEventLoop | None = None) -> CollectorRegistry:
    """A registry of the fleet's metrics and the exporter process's own (CPU, memory)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(fleet, loop))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_memory_bytes: its own cost
    return registry
