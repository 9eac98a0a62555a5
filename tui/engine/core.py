"""The engine for one deployment: collectors feed events to the lifecycle reducer; front ends read snapshots.

One `Engine` per deployment owns one long-lived collector per stream (unit state, the current invocation's log,
GPUs, probes, metrics) on the running event loop, and never spawns a process per refresh tick except where a
source has no streaming form (the nvidia-smi compute-apps query, every few seconds). The CLI and the console use
exactly this class, so `bringup wait` and the console cannot disagree about a phase. The streams' own state lives
in their modules (unit, logs, gpus, throughput, probes); this class ties them together: construction, the reducer
and the listeners, task supervision, and what a stream's readings mean for the others.

Every stream is built like the log's follower: what it reads is handed to it, what it finds comes back through a
callback, so no stream module imports this one. What code above the engine reads of it (the protocols, `bringup
status`, the exporter) is the small surface it inherits (surface.py); a front end reads the `Snapshot` and the
typed updates (updates.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from tui.config.deployments import DeploymentConfig
from tui.config.settings import Settings
from tui.lifecycle.eta import key_groups
from tui.lifecycle.lines import LineKind
from tui.lifecycle.presets import FlagSpec, Preset, get_preset
from tui.lifecycle.reducer import LifecycleState, initial, reduce, reduce_classified
from tui.managers import Manager
from tui.managers.placement import Placed
from tui.model import (
    ActionTaken,
    Event,
    GpuSnapshot,
    LogLine,
    MemoryObserved,
    Phase,
    ProbeRequired,
    ProbeResult,
    Snapshot,
    ThroughputSample,
)
from tui.transport import Transport, TransportError

from . import view
from .build import (
    NodeLink,
    forwarded_endpoint,
    gpu_keys,
    make_manager,
    make_multinode,
    make_prober,
    make_transport,
    open_links,
)
from .cadence import ProbeCadence
from .collector_errors import CollectorErrors
from .gpu_owners import GpuOwners
from .gpus import GpuTracker
from .history import HistoryStore, RunRecorder, history_path
from .host_gpus import HostGpuStream
from .listeners import Listeners
from .logs import LogFollower
from .node_gpus import NodesGpuStream
from .placed import PlacedGpus, follow_endpoint, placed_endpoint, reach
from .probes import ProbeLoop
from .server_version import ReleaseQuery, ask_release
from .surface import EngineSurface
from .throughput import MetricsState, ThroughputTracker, metrics_every, metrics_loop
from .unit import UnitFollower
from .updates import (
    CollectorFailed,
    GpusSampled,
    HolderChanged,
    LogsRead,
    PhaseChanged,
    ProbeAnswered,
    ThroughputSampled,
    Update,
)


class Engine(EngineSurface):
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
        #: the running server's release, learnt before this engine follows the run (settle.py `running_release`):
        #: what a change planned before the run says its release is validated against
        self.learned_release: str | None = None
        self.transport = transport or make_transport(self.host)
        self._owns_transport = transport is None
        #: the links of a deployment over several nodes that this engine opened (and closes)
        self._own_links: list[NodeLink] = []
        shared: HostGpuStream | NodesGpuStream | PlacedGpus | None = gpu_stream
        self.manager: Manager
        if dep.multinode:
            links = node_links
            if not links:
                links, self._own_links = open_links(settings, dep, self.transport)
            self.manager = make_multinode(settings, name, dep, self.preset, links)
            shared = NodesGpuStream([ln.name for ln in links], [ln.gpus for ln in links])
        else:
            self.manager = make_manager(settings, name, dep, self.host, self.transport)
        if isinstance(self.manager, Placed):  # a scheduler's run: its GPUs read where it landed (placed.py)
            shared = PlacedGpus(self.manager, self.transport)
        self.prober = make_prober(settings, name, dep.endpoint, self.preset)
        self.gpu = GpuTracker(self.host, self.transport, gpu_keys(dep),
                              settings.state_path() / "deployments" / name / "gpu-baseline.json", shared=shared)
        self.gpu.background = lambda: self.background
        #: whose the other processes on its GPUs are (another deployment's, another user's): the release wait asks
        self.owners = GpuOwners(settings, name, dep, self.transport, lambda: self.gpu.neighbours())
        self.tput = ThroughputTracker(self.preset)
        self.tput.probes = self.prober.generated  # bringup's own generations are no throughput (connect_endpoint too)
        self.cadence = ProbeCadence(slow_s=settings.probe.ready_interval_s)
        self.release_query = ReleaseQuery()
        #: the deployment's run history (the operator's own file): each run's record, and the ETA read from it
        self.history = RunRecorder(HistoryStore(history_path(settings.state_path(), name)))
        self.history.together = key_groups(self.preset.flags)  # one `g` press, one change (issue 51)
        self.history.hidden = tuple(dep.hide_flags)  # the ETA names no flag the command line hides
        self.dep = dep
        self.state: LifecycleState = initial(logs_available=self.manager.sees_run,
                                             stall_after=dep.stall_after_s or settings.probe.stall_after_s,
                                             release_before=self.history.last_release())
        self.collector_errors = CollectorErrors(lambda note: self.emit(CollectorFailed(note)))
        self.last_probe: ProbeResult | None = None
        #: (invocation, port) from the server's own "Uvicorn running on http://HOST:PORT" line
        self.listening: tuple[str, int] | None = None
        self.paused = False
        #: a deployment of a fleet that no one is looking at (the overview shows its row only): its readings that
        #: only feed figures come slower (/metrics every 10 s; the unit every 2 s once ready; the lock's holder when
        #: the unit changes, else every 30 s; the run's processes when a process no one placed appears on its GPUs,
        #: else every 60 s); its log, its phase while in question and its failures come as fast as ever
        self.background = False
        #: read the lock's holder every 2 s even in the background (the exporter counts others' restarts by it)
        self.watch_holders = False
        self._forwarded = False
        self._placed_at = ""  # the endpoint of the placed run probed now (engine/placed.py)
        #: who hears the engine's updates, and its whole picture every second for a front end that asks
        self.listeners = Listeners(self.snapshot, lambda: not self.paused and not self.background)
        self._tasks: list[asyncio.Task[None]] = []
        self.log = LogFollower(self.manager, self._lines_read, lambda lines, kinds: self.emit(LogsRead(lines, kinds)))
        self.unit_follower = UnitFollower(
            self.manager, lambda: self.state, self.collector_errors, feed=self.feed, read_back=self._read_back,
            run_changed=self.cadence.woke, holder_changed=lambda h: self.emit(HolderChanged(h)),
            pids=self.refresh_pids, followed=lambda: self.log.followed, background=lambda: self.background,
            watch_holders=lambda: self.watch_holders, host_name=self.host_name)
        self.probes = ProbeLoop(
            lambda: self.prober, lambda: self.state, self.cadence, interval_s=settings.probe.interval_s,
            unmanaged=not self.manager.sees_run, paused=lambda: self.paused, ask_release=self.ask_release,
            answered=self._probe_answered, scrape_every=self._evidence_scrape_s)
        self._last_line_mono = 0.0
        #: the kind of the last line classified: an error block goes on into the next batch
        self._kind_after = LineKind.PLAIN

    @property
    def dep(self) -> DeploymentConfig:
        return self._dep

    @dep.setter
    def dep(self, dep: DeploymentConfig) -> None:  # a command may narrow it (its own --timeout)
        self._dep = dep
        self.gpu.configured = tuple(gpu_keys(dep))

    # ------------------------------------------------------------------ the reducer and the listeners

    def emit(self, update: Update) -> None:
        self.listeners.emit(update)

    def feed(self, ev: Event) -> None:
        """Apply one event to the reducer; tell listeners when the phase picture changed."""
        if not isinstance(ev, LogLine):
            self.log.apply_due()  # events keep their order
        if isinstance(ev, ProbeResult):
            self.last_probe = ev
        before = self.state
        self.state = reduce(self.state, ev, self.preset)
        self._phase_maybe_changed(before)

    def feed_lines(self, lines: Sequence[LogLine]) -> tuple[LineKind, ...]:
        """Many lines at once (a burst, a log read back): one state copy per run of quiet lines. Gives each line's
        kind for the errors view, classified as the reducer read it (a block goes on across batches)."""
        before = self.state
        self.state, kinds = reduce_classified(self.state, lines, self.preset, self._kind_after)
        if kinds:
            self._kind_after = kinds[-1]
        self._phase_maybe_changed(before)
        return kinds

    def _phase_maybe_changed(self, before: LifecycleState) -> None:
        if (self.state.phase != before.phase or self.state.timeline != before.timeline
                or self.state.failure != before.failure or self.state.invocation != before.invocation
                or self.state.release != before.release
                or (self.state.stalled_for is None) != (before.stalled_for is None)):  # a hang is recorded as one
            if before.invocation and self.state.invocation != before.invocation:
                self.tput.new_run()  # before the picture goes out: no old figure shown as the new run's
            self.history.changed(self)
            self.emit(PhaseChanged(self.snapshot()))

    def snapshot(self, now: float | None = None) -> Snapshot:
        return view.build_snapshot(self.state, self._readings(), now)

    def _readings(self) -> view.Readings:
        unit = self.state.unit
        return view.Readings(
            deployment=self.name, host_name=self.host_name, host=self.host, transport=self.transport,
            preset=self.preset, endpoint=self.dep.endpoint, can_control=self.manager.can_control,
            unit_seen_at=self.unit_seen_at, other_holder=self.other_holder, collector_errors=self.collector_errors,
            metrics_state=self.metrics_state, listening=self.listening, last_probe=self.last_probe,
            gpus=self.gpus, gpu_history=self.gpu.mem_history(),
            attribution=self.gpu.attribution(running=unit is not None and unit.running),
            throughput=self.throughput, tps_history=self.tput.history_now(),
            eta=lambda s, latest, now: self.history.eta(self.name, s, latest, now), earlier=self.history.earlier,
            target=self.manager.target, deployment_gpus=tuple(self.deployment_gpus()),
            gpu_holders=self.gpu.named_holders(unit is not None and unit.running))

    def note_error(self, collector: str, error: str) -> None:
        self.collector_errors.failed(collector, error)

    # ------------------------------------------------------------------ tasks

    async def connect_endpoint(self) -> None:
        """An endpoint on the remote host's loopback is reached through a port forward on the SSH connection."""
        if isinstance(self.manager, Placed):  # the placed run's, followed as it moves (the "endpoint" collector)
            if (endpoint := await placed_endpoint(self.manager)) is not None:
                await self._use_endpoint(endpoint)
            return
        if not self._forwarded and (url := await forwarded_endpoint(self.transport, self.dep.endpoint)):
            await self.prober.close()
            self.prober = make_prober(self.settings, self.name, url, self.preset)
            self.tput.probes = self.prober.generated  # the ledger of bringup's own generations goes with it
            self._forwarded = True

    def _collectors(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        """Each collector by the name its errors are filed under, as a function that starts it (again)."""
        unit = self.unit_follower
        found: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
                "unit": unit.run, "logs": lambda: self.log.run(lambda: self.state.unit, unit.changed),
                "probe": self.probes.run, "gpus": lambda: self.gpu.run(self._gpus_sampled),
                "metrics": lambda: metrics_loop(self.scrape_metrics, self._serving, lambda: self.background,
                                                lambda: self.collector_errors.cleared("metrics")),
                "news": unit.watch_news}
        if isinstance(placed := self.manager, Placed):
            found["endpoint"] = lambda: follow_endpoint(placed, lambda: self._placed_at, self._use_endpoint)
        return found

    async def _use_endpoint(self, endpoint: str) -> None:
        """The placed run's endpoint, reached through the host (placed.py): probed from now on."""
        url = await reach(self.transport, endpoint)
        self._placed_at = endpoint
        await self.prober.close()
        self.prober = make_prober(self.settings, self.name, url, self.preset)
        self.tput.probes = self.prober.generated

    async def start(self) -> None:
        with contextlib.suppress(TransportError):
            await self.connect_endpoint()
        for name, loop in self._collectors().items():
            self._tasks.append(asyncio.create_task(self._guard(name, loop), name=f"bringup-{name}"))

    async def close(self) -> None:
        """Stop every collector and the commands they run. Bounded: a caller (a CLI about to exit, a console
        quitting) must never wait on a collector that does not stop. Nothing is delivered after close: a console
        switching deployments must not get the old one's last lines."""
        self.listeners.close()
        self.log.close()
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5.0)
        self._tasks.clear()
        with contextlib.suppress(Exception):  # the run's record, written off the loop: on file before we go
            async with asyncio.timeout(5.0):
                await self.history.flush()
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
            self.collector_errors["gpus"] = snap.error  # a hiccup: noted, the last good figures stay shown
            return
        self.collector_errors.cleared("gpus")
        used = self.gpu.deployment_memory_mib(snap)
        self.history.gpus_seen(self)
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

    def _lines_read(self, lines: list[LogLine]) -> tuple[LineKind, ...]:
        """Lines of the followed log, as read: to the reducer, and to what else the log tells (where the server
        listens; its own throughput lines, when /metrics says nothing)."""
        self._last_line_mono = time.monotonic()
        self.collector_errors.cleared("logs")
        self.listening = view.find_listening(lines) or self.listening
        kinds = self.feed_lines(lines)
        for tp in self.tput.log_samples(lines):
            self._throughput_sampled(tp, merge=True)
        return kinds

    def _read_back(self, lines: list[LogLine], ended: bool) -> None:
        """A run's log so far, read at once (unit.py): to the reducer and the listeners like followed lines. For a
        run that has ended, no probe is asked for while its lines are applied: its own ready line is the evidence."""
        probe = self.state.require_probe
        if ended:
            self.feed(ProbeRequired(self.state.now, False))
        self.listening = view.find_listening(lines) or self.listening
        kinds = self.feed_lines(lines)
        self.feed(ProbeRequired(self.state.now, probe))
        tp = self.tput.from_log_groups(lines)
        if tp is not None:
            self.tput.latest = tp
        if lines:
            self.emit(LogsRead(tuple(lines), kinds))

    # ------------------------------------------------------------------ probes, as they are answered

    def _probe_answered(self, r: ProbeResult) -> None:
        self.collector_errors.cleared("probe")
        self.feed(r)
        self.emit(ProbeAnswered(r))

    async def ask_release(self) -> None:
        """Ask the server its release, if that is due (server_version.py); the answer goes to the reducer."""
        answer = await ask_release(self.release_query, self.prober, self.state, self.preset)
        if answer is not None:
            self.feed(answer)

    def _serving(self) -> bool:
        return self.state.phase == Phase.READY and not self.paused

    def _evidence_scrape_s(self) -> float:
        """How often the counters that prove the run alive are scraped: only /metrics' pace changes in the
        background (the log's stat lines come at the server's own)."""
        return metrics_every(self.background) if self.tput.metrics == MetricsState.ON else 0.0

    # ------------------------------------------------------------------ actions

    def action(self, name: str) -> None:
        self.history.acted(self, name)
        self.feed(ActionTaken(time.time(), name))
        self.cadence.woke(time.time())
        self.unit_follower.poke()

    def probe_now(self) -> None:
        """The operator asks: a real generation at once (and nothing more: the pace stays as the evidence says)."""
        self.cadence.woke(time.time(), asked=True)
        self.probes.poke.set()

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

