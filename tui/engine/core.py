"""The engine for one deployment: collectors feed events to the lifecycle reducer; front ends read snapshots.

One `Engine` per deployment owns one long-lived collector per stream (unit state, the current invocation's log,
GPUs, probes, metrics) on the running event loop, and never spawns a process per refresh tick except where a
source has no streaming form (the nvidia-smi compute-apps query, every few seconds). The CLI and the console use
exactly this class, so `bringup wait` and the console cannot disagree about a phase. The streams' own state lives
in their modules (unit, logs, gpus, throughput, probes); this class ties them together: construction, the reducer
and the listeners, task supervision, and what a stream's readings mean for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from tui.config import DeploymentConfig, Settings
from tui.lifecycle.presets import FlagSpec, Preset, get_preset
from tui.lifecycle.presets.facts import resolve
from tui.lifecycle.reducer import LifecycleState, initial, reduce, reduce_lines
from tui.managers import Manager
from tui.model import (
    ActionTaken,
    Event,
    GpuSnapshot,
    LogLine,
    MemoryObserved,
    Note,
    NoteSource,
    ProbeResult,
    Snapshot,
    ThroughputSample,
)
from tui.transport import Transport, TransportError

from . import view
from .build import NodeLink, forwarded_endpoint, gpu_keys, make_manager, make_multinode, make_prober, make_transport
from .cadence import ProbeCadence
from .gpus import GpuSampler, GpuTracker
from .host_gpus import HostGpuStream
from .logs import LogFollower
from .node_gpus import NodesGpuStream
from .probes import probe_loop
from .readouts import StreamReadouts
from .server_version import ReleaseQuery
from .throughput import ThroughputTracker, metrics_loop
from .unit import UnitFollower
from .updates import CollectorFailed, GpusSampled, LogsRead, PhaseChanged, ThroughputSampled, Update


class Engine(StreamReadouts):
    def __init__(self, settings: Settings, name: str, dep: DeploymentConfig, *,
                 transport: Transport | None = None, gpu_stream: HostGpuStream | None = None,
                 node_links: list[NodeLink] | None = None) -> None:
        """`transport` and `gpu_stream`: the host's, shared with the other deployments on it (tui/engine/fleet.py);
        given, they are the giver's to close. Without them the engine opens its own, as a single deployment's.
        `node_links`: the same, for each node of a deployment over several nodes (head first)."""
        self.settings = settings
        self.name = name
        self.host = settings.host(dep.host)
        self.host_name = dep.host_label
        self.preset: Preset = get_preset(dep.preset)
        self._extra_specs = [f.spec() for f in dep.extra_flags]
        #: every flag of every covered release: what an argv is read with (a run's own flags may predate its release)
        self.flag_specs: list[FlagSpec] = [*self.preset.flags, *self._extra_specs]
        self.transport = transport or make_transport(self.host)
        self._owns_transport = transport is None
        #: the links of a deployment over several nodes that this engine opened (and closes)
        self._own_links: list[NodeLink] = []
        shared: HostGpuStream | NodesGpuStream | None = gpu_stream
        self.manager: Manager
        if dep.multinode:
            links = node_links or self._open_links(dep)
            self.manager = make_multinode(settings, name, dep, self.preset, links)
            shared = NodesGpuStream([ln.name for ln in links], [ln.gpus for ln in links])
        else:
            self.manager = make_manager(settings, name, dep, self.host, self.transport)
        self.prober = make_prober(settings, dep.endpoint, self.preset)
        self.gpu = GpuTracker(self.host, self.transport, gpu_keys(dep),
                              settings.state_path() / "deployments" / name / "gpu-baseline.json", shared=shared)
        self.gpu.background = lambda: self.background
        self.tput = ThroughputTracker(self.preset)
        self.cadence = ProbeCadence(slow_s=settings.probe.ready_interval_s)
        self.release_query = ReleaseQuery()
        self.probe_poke = asyncio.Event()
        self.dep = dep
        self.state: LifecycleState = initial(logs_available=self.manager.sees_run,
                                             stall_after=dep.stall_after_s or settings.probe.stall_after_s)
        self.collector_errors: dict[str, str] = {}
        self.last_probe: ProbeResult | None = None
        #: (invocation, port) from the server's own "Uvicorn running on http://HOST:PORT" line
        self.listening: tuple[str, int] | None = None
        self.paused = False
        #: a deployment of a fleet that no one is looking at (the overview shows its row only): its readings that
        #: only feed figures come slower (/metrics every 5 s; the unit every 2 s once ready, the lock's holder every
        #: 10 s); its log, its phase while in question and its failures come as fast as ever
        self.background = False
        #: read the lock's holder every 2 s even in the background (the exporter counts others' restarts by it)
        self.watch_holders = False
        self._forwarded = False
        self._listeners: list[Callable[[Update], None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Event()
        self.unit_follower = UnitFollower(self)
        self.log = LogFollower(self.manager, self._lines_read, lambda lines: self.emit(LogsRead(lines)))
        self._last_line_mono = 0.0

    @property
    def dep(self) -> DeploymentConfig:
        return self._dep

    @dep.setter
    def dep(self, dep: DeploymentConfig) -> None:  # a command may narrow it (its own --timeout)
        self._dep = dep
        self.gpu.configured = tuple(gpu_keys(dep))

    def _open_links(self, dep: DeploymentConfig) -> list[NodeLink]:
        """A deployment over several nodes watched alone: a connection and a GPU stream per node host (the head's
        connection is the engine's own)."""
        by_host: dict[str, NodeLink] = {}
        for n in dep.nodes:
            if n.host not in by_host:
                cfg = self.settings.host(n.host)
                tr = self.transport if n.host == dep.host else make_transport(cfg)
                by_host[n.host] = NodeLink(n.host, cfg, tr, HostGpuStream(GpuSampler(cfg, tr)))
                self._own_links.append(by_host[n.host])
        return [by_host[n.host] for n in dep.nodes]

    # ------------------------------------------------------------------ the reducer and the listeners

    def subscribe(self, fn: Callable[[Update], None]) -> None:
        self._listeners.append(fn)

    def unsubscribe(self, fn: Callable[[Update], None]) -> None:
        """A console that shows another of the fleet's engines stops listening to this one, which keeps running."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(fn)

    def emit(self, update: Update) -> None:
        self._changed.set()
        for fn in list(self._listeners):
            fn(update)

    def feed(self, ev: Event) -> None:
        """Apply one event to the reducer; tell listeners when the phase picture changed."""
        if not isinstance(ev, LogLine):
            self.log.apply_due()  # events keep their order
        if isinstance(ev, ProbeResult):
            self.last_probe = ev
        before = self.state
        self.state = reduce(self.state, ev, self.preset)
        self._phase_maybe_changed(before)

    def feed_lines(self, lines: Sequence[LogLine]) -> None:
        """Many lines at once (a burst, a log read back): one state copy per run of quiet lines."""
        before = self.state
        self.state = reduce_lines(self.state, lines, self.preset)
        self._phase_maybe_changed(before)

    @property
    def offered_flags(self) -> list[FlagSpec]:
        """The flags this run's release takes, with its own choices (the newest release's while the run has not said
        which it is): what the flags dialog lists and `--set` validates, so no edit makes the server refuse its
        command line."""
        version = self.state.release.version if self.state.release is not None else None
        return [*self.preset.for_version(version).flags, *self._extra_specs]

    def editable_flags(self, values: Mapping[str, str | None]) -> list[FlagSpec]:
        """The offered flags, and any flag the run's argv gives that its release does not offer (set by hand, or for
        an older release): listed too, so it can be seen and removed."""
        offered = self.offered_flags
        names = {f.name for f in offered}
        return [*offered, *(f for f in self.flag_specs if f.name in values and f.name not in names)]

    def release_words(self) -> str:
        """`SGLang 0.5.23`, or `SGLang (release not said yet; flags of 0.5.23, the newest known)`."""
        name = self.preset.display_name or self.preset.name
        if self.state.release is not None:
            return f"{name} {self.state.release.version}"
        facts = resolve(self.preset.name, None).facts
        return f"{name} (release not said yet{'; flags of ' + facts.version + ', the newest known' if facts else ''})"

    def _phase_maybe_changed(self, before: LifecycleState) -> None:
        if (self.state.phase != before.phase or self.state.timeline != before.timeline
                or self.state.failure != before.failure or self.state.invocation != before.invocation
                or self.state.release != before.release):
            self.emit(PhaseChanged(self.snapshot()))

    def snapshot(self, now: float | None = None) -> Snapshot:
        return view.build_snapshot(self, now)

    def note_error(self, collector: str, error: str) -> None:
        self.collector_errors[collector] = error
        self.emit(CollectorFailed(Note(NoteSource(collector), f"{collector}: {error}")))

    # ------------------------------------------------------------------ tasks

    async def connect_endpoint(self) -> None:
        """An endpoint on the remote host's loopback is reached through a port forward on the SSH connection."""
        if not self._forwarded and (url := await forwarded_endpoint(self.transport, self.dep.endpoint)):
            await self.prober.close()
            self.prober = make_prober(self.settings, url, self.preset)
            self._forwarded = True

    def _collectors(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        """Each collector by the name its errors are filed under, as a function that starts it (again)."""
        unit = self.unit_follower
        return {"unit": unit.run, "logs": lambda: self.log.run(lambda: self.state.unit, unit.changed),
                "probe": lambda: probe_loop(self), "gpus": lambda: self.gpu.run(self._gpus_sampled),
                "metrics": lambda: metrics_loop(self), "news": unit.watch_news}

    async def start(self) -> None:
        with contextlib.suppress(TransportError):
            await self.connect_endpoint()
        for name, loop in self._collectors().items():
            self._tasks.append(asyncio.create_task(self._guard(name, loop), name=f"bringup-{name}"))

    async def close(self) -> None:
        """Stop every collector and the commands they run. Bounded: a caller (a CLI about to exit, a console
        quitting) must never wait on a collector that does not stop. Nothing is delivered after close: a console
        switching deployments must not get the old one's last lines."""
        self._listeners.clear()
        self.log.close()
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5.0)
        self._tasks.clear()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(3.0):
                await self.prober.close()
        self.gpu.close()
        for link in self._own_links:
            await link.gpus.close()
            if link.transport is not self.transport:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(3.0):
                        await link.transport.close()
        if not self._owns_transport:  # the host's shared connection: the fleet closes it after its last engine
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(3.0):
                await self.transport.close()

    async def _guard(self, name: str, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """A collector that fails reports its error and is restarted; it never takes the engine down."""
        backoff = 1.0
        while True:
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a collector must never kill the engine
                self.note_error(name, f"{type(e).__name__}: {e}")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30)

    # ------------------------------------------------------------------ GPUs and throughput, as they arrive

    def _gpus_sampled(self, snap: GpuSnapshot) -> None:
        if not self.gpu.accept(snap):
            self.collector_errors["gpus"] = snap.error
            return
        self.collector_errors.pop("gpus", None)
        used = self.gpu.deployment_memory_mib(snap)
        if used is not None:
            self.feed(MemoryObserved(snap.at, used))
        self.emit(GpusSampled(snap, self.gpu.mem_history()))

    def _throughput_sampled(self, tp: ThroughputSample, merge: bool = False) -> None:
        tp = self.tput.record(tp, merge)
        self.cadence.sampled(tp)
        self.emit(ThroughputSampled(tp, self.tput.history_now()))

    def observe_gpus(self, snap: GpuSnapshot) -> None:
        """A sample taken outside the stream (the release wait's own queries), shown like a streamed one unless
        the stream has a newer one."""
        if self.gpus is None or snap.at >= self.gpus.at:
            self._gpus_sampled(snap)

    async def scrape_metrics(self) -> ThroughputSample | None:
        """One scrape of /metrics; sets `metrics_state` (off: the server serves none) and the throughput.
        Raises httpx.HTTPError or TimeoutError when the endpoint does not answer."""
        tp = await self.tput.scrape(self.prober.client, self.settings.probe.timeout_s)
        if tp is not None:
            self._throughput_sampled(tp)
        return tp

    # ------------------------------------------------------------------ the log, as it is read

    def _lines_read(self, lines: list[LogLine]) -> None:
        """Lines of the followed log, as read: to the reducer, and to what else the log tells (where the server
        listens; its own throughput lines, when /metrics says nothing)."""
        self._last_line_mono = time.monotonic()
        self.collector_errors.pop("logs", None)
        self.listening = view.find_listening(lines) or self.listening
        self.feed_lines(lines)
        for tp in self.tput.log_samples(lines):
            self._throughput_sampled(tp, merge=True)

    # ------------------------------------------------------------------ actions

    def action(self, name: str) -> None:
        self.feed(ActionTaken(time.time(), name))
        self.cadence.woke(time.time())
        self.unit_follower.poke()

    def probe_now(self) -> None:
        """The operator asks: a real generation at once (and nothing more: the pace stays as the evidence says)."""
        self.cadence.woke(time.time(), asked=True)
        self.probe_poke.set()

    async def settle_failure(self, timeout: float = 2.0, quiet: float = 0.3) -> None:
        """After a fatal line, give the rest of its traceback a moment to arrive so the excerpt is whole; no longer
        than that: once the cause is in and the log has been quiet for `quiet` seconds (a traceback arrives in one
        burst), the failure is told at once."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.state
            # an exit still waiting for its cause waits the whole time
            if not st.failure_is_exit and (not st.failure_open or time.monotonic() - self._last_line_mono >= quiet):
                break
            await self.wait_changed(min(0.1, quiet))

    async def wait_changed(self, timeout: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()
