"""The engine for one deployment: collectors feed events to the lifecycle reducer; front ends read snapshots.

One `Engine` per deployment owns one long-lived collector per stream (unit state, the current invocation's log,
GPUs, probes, metrics) on the running event loop, and never spawns a process per refresh tick except where a
source has no streaming form (the nvidia-smi compute-apps query, every few seconds). The CLI and the console use
exactly this class, so `bringup wait` and the console cannot disagree about a phase. The streams' own state lives
in their modules (unit, logs, gpus, throughput, probes); this class ties them together: construction, the reducer
and the listeners, task supervision, and what a stream's readings mean for the others.

Every stream is built like the log's follower: what it reads is handed to it, what it finds comes back through a
callback, so no stream module imports this one. What code above the engine reads of it (the protocols, `bringup
status`, the exporter) is the small surface at the end of this class; a front end reads the `Snapshot` and the
typed updates (updates.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from tui.config import DeploymentConfig, Settings
from tui.guard.redact import BOOK
from tui.lifecycle.eta import key_groups
from tui.lifecycle.flags import current_values
from tui.lifecycle.lines import LineKind
from tui.lifecycle.presets import FlagSpec, Preset, get_preset
from tui.lifecycle.presets.facts import resolve
from tui.lifecycle.reducer import LifecycleState, initial, reduce, reduce_classified
from tui.managers import LockInfo, Manager
from tui.managers.lock_record import other_holder
from tui.model import (
    ActionTaken,
    Event,
    Failure,
    GpuSnapshot,
    LogLine,
    MemoryObserved,
    Phase,
    ProbeRequired,
    ProbeResult,
    Snapshot,
    ThroughputSample,
    UnitState,
)
from tui.transport import Transport, TransportError

from . import view
from .build import NodeLink, forwarded_endpoint, gpu_keys, make_manager, make_multinode, make_prober, make_transport
from .cadence import ProbeCadence
from .collector_errors import CollectorErrors
from .gpu_sampler import GpuSampler
from .gpus import GpuTracker
from .grid import sleep_on_grid
from .history import HistoryStore, RunRecorder, history_path
from .host_gpus import HostGpuStream
from .logs import LogFollower
from .node_gpus import NodesGpuStream
from .probes import ProbeLoop
from .server_version import ReleaseQuery, ask_release
from .throughput import MetricsState, ThroughputTracker, metrics_every, metrics_loop
from .unit import UnitFollower
from .updates import (
    CollectorFailed,
    GpusSampled,
    HolderChanged,
    LogsRead,
    PhaseChanged,
    PictureTaken,
    ProbeAnswered,
    ThroughputSampled,
    Update,
)


class Engine:
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
        #: the learnt release is the one the deployment's last run said (the server is not running): said as such
        self.learned_from_last_run = False
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
        self.prober = make_prober(settings, name, dep.endpoint, self.preset)
        self.gpu = GpuTracker(self.host, self.transport, gpu_keys(dep),
                              settings.state_path() / "deployments" / name / "gpu-baseline.json", shared=shared)
        self.gpu.background = lambda: self.background
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
                                             stall_after=dep.stall_after_s or settings.probe.stall_after_s)
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
        #: a front end that draws by the clock (the console) is told the whole picture every second (`PictureTaken`)
        #: while it shows this engine (`pictures`); no other listener asks for it
        self._pictures = False
        self._picture_task: asyncio.Task[None] | None = None
        self._forwarded = False
        self._listeners: list[Callable[[Update], None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Event()
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

    def feed_lines(self, lines: Sequence[LogLine]) -> tuple[LineKind, ...]:
        """Many lines at once (a burst, a log read back): one state copy per run of quiet lines. Gives each line's
        kind for the errors view, classified as the reducer read it (a block goes on across batches)."""
        before = self.state
        self.state, kinds = reduce_classified(self.state, lines, self.preset, self._kind_after)
        if kinds:
            self._kind_after = kinds[-1]
        self._phase_maybe_changed(before)
        return kinds

    @property
    def offered_flags(self) -> list[FlagSpec]:
        """The flags this run's release takes, with its own choices (the newest release's while the run has not said
        which it is): what the flags dialog lists and `--set` validates, so no edit makes the server refuse its
        command line."""
        version = self.state.release.version if self.state.release is not None else self.learned_release
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
        if self.learned_release is not None:
            last = " (its last run's release)" if self.learned_from_last_run else ""
            return f"{name} {self.learned_release}{last}"
        facts = resolve(self.preset.name, None).facts
        return f"{name} (release not said yet{'; flags of ' + facts.version + ', the newest known' if facts else ''})"

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
        if not self._forwarded and (url := await forwarded_endpoint(self.transport, self.dep.endpoint)):
            await self.prober.close()
            self.prober = make_prober(self.settings, self.name, url, self.preset)
            self.tput.probes = self.prober.generated  # the ledger of bringup's own generations goes with it
            self._forwarded = True

    def _collectors(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        """Each collector by the name its errors are filed under, as a function that starts it (again)."""
        unit = self.unit_follower
        return {"unit": unit.run, "logs": lambda: self.log.run(lambda: self.state.unit, unit.changed),
                "probe": self.probes.run, "gpus": lambda: self.gpu.run(self._gpus_sampled),
                "metrics": lambda: metrics_loop(self.scrape_metrics, self._serving, lambda: self.background,
                                                lambda: self.collector_errors.cleared("metrics")),
                "news": unit.watch_news}

    async def start(self) -> None:
        with contextlib.suppress(TransportError):
            await self.connect_endpoint()
        for name, loop in self._collectors().items():
            self._tasks.append(asyncio.create_task(self._guard(name, loop), name=f"bringup-{name}"))

    @property
    def pictures(self) -> bool:
        """Whether the listeners are told the whole picture every second (`PictureTaken`)."""
        return self._pictures

    @pictures.setter
    def pictures(self, on: bool) -> None:
        """Asked for, the pictures begin at the next second of the grid, whether the collectors run or not (a
        console opened on what an engine has read so far is told it too); no longer asked for, they end there."""
        self._pictures = on
        if on and self._picture_task is None:
            with contextlib.suppress(RuntimeError):  # no loop running: nothing can listen yet, nor be drawn
                self._picture_task = asyncio.get_running_loop().create_task(self._picture_loop(),
                                                                            name="bringup-picture")

    async def _picture_loop(self) -> None:
        """The whole picture, on the one-second grid the periodic readings share (no wake-up of its own), while a
        front end asks for it and is looking: not paused, not in a fleet's background."""
        try:
            while self._pictures:
                await sleep_on_grid(1.0)
                if self._pictures and not self.paused and not self.background and self._listeners:
                    picture = PictureTaken(self.snapshot())
                    for fn in list(self._listeners):  # news of no change: `wait_changed` is not woken by it
                        fn(picture)
        finally:
            self._picture_task = None

    async def close(self) -> None:
        """Stop every collector and the commands they run. Bounded: a caller (a CLI about to exit, a console
        quitting) must never wait on a collector that does not stop. Nothing is delivered after close: a console
        switching deployments must not get the old one's last lines."""
        self._listeners.clear()
        self._pictures = False
        if self._picture_task is not None:
            self._picture_task.cancel()
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

    async def wait_changed(self, timeout: float) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()

    # ------------------------------------------------------------------ what code above the engine reads of it
    # the protocols (ops/engine_view.py: EngineView, ops/wait.py: WaitEngine), `bringup status` (settle.py), the
    # exporter; each is the state of the part that keeps it, or a plain function of the engine's state

    @property
    def unit_seen_at(self) -> float | None:
        return self.unit_follower.seen_at

    @property
    def other_holder(self) -> LockInfo | None:
        return self.unit_follower.other_holder

    async def holder_now(self) -> LockInfo | None:
        """Another bringup's restart, start or stop on this deployment, read at once (not at the follower's pace):
        a console asks before it opens a restart dialog, which the lock would refuse only after the operator said
        yes."""
        return await other_holder(self.manager.lock("watch"))

    @property
    def permanent_error(self) -> Exception | None:
        return self.unit_follower.permanent_error

    async def poll_unit(self) -> UnitState:
        return await self.unit_follower.poll()

    async def replay_history(self, invocation: str, ended: bool = False) -> None:
        await self.unit_follower.replay_history(invocation, ended)

    def _evidence_scrape_s(self) -> float:
        """How often the counters that prove the run alive are scraped: only /metrics' pace changes in the
        background (the log's stat lines come at the server's own)."""
        return metrics_every(self.background) if self.tput.metrics == MetricsState.ON else 0.0

    async def refresh_pids(self, unit: UnitState) -> None:
        await self.gpu.refresh_pids(self.manager, unit, settled=self.state.phase == Phase.READY)

    async def argv(self) -> list[str]:
        argv = await self.manager.read_argv()
        BOOK.learn_argv(argv)  # its secrets hidden in whatever shows them after (tui/guard/redact.py)
        return argv

    @property
    def configured_command(self) -> list[str] | None:
        """The config's command line, where the manager keeps flags apart from it (tui/ops/config_drift.py)."""
        return self.dep.configured_command

    async def flag_values(self) -> dict[str, str | None]:
        return current_values(await self.argv(), self.flag_specs)

    def named(self, failure: Failure | None) -> Failure | None:
        return view.named(failure, self.name)

    def endpoint_mismatch(self) -> str:
        return view.endpoint_mismatch(self.listening, self.state.invocation, self.dep.endpoint)

    def stall_note(self) -> str:
        return view.stall_note(self.state)

    def current_probe(self) -> ProbeResult | None:
        return view.current_probe(self.last_probe, self.state)

    @property
    def gpus(self) -> GpuSnapshot | None:
        return self.gpu.latest

    @gpus.setter
    def gpus(self, snap: GpuSnapshot | None) -> None:  # a one-shot reading (`bringup status`)
        self.gpu.latest = snap

    @property
    def run_pids(self) -> set[int] | None:
        return self.gpu.run_pids

    @property
    def previous_pids(self) -> set[int]:
        return self.gpu.previous_pids

    @previous_pids.setter
    def previous_pids(self, pids: set[int]) -> None:  # released: no panel may still say the old run holds memory
        self.gpu.previous_pids = pids

    @property
    def baseline_mib(self) -> dict[int, float]:
        return self.gpu.baseline_mib

    def save_baseline(self, snap: GpuSnapshot) -> None:
        self.gpu.save_baseline(snap)

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None:
        return await self.gpu.fresh(max_age)

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]:
        return self.gpu.deployment_gpus(snap)

    @property
    def throughput(self) -> ThroughputSample | None:
        return self.tput.latest

    @property
    def metrics_state(self) -> MetricsState:
        return self.tput.metrics
