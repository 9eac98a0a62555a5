"""The engine for one deployment: collectors feed events to the lifecycle reducer; front ends read snapshots.

One `Watch` per deployment owns one long-lived collector per stream (unit state, the current invocation's log,
GPUs, probes, metrics) on the running event loop, and never spawns a process per refresh tick except where a
source has no streaming form (the nvidia-smi compute-apps query, every few seconds). The CLI and the console use
exactly this class, so `bringup wait` and the console cannot disagree about a phase.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import re
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tui.collectors.gpu_nvml import NvmlSource, NvmlUnavailable
from tui.collectors.gpu_smi import SmiSource
from tui.collectors.metrics import MetricsRates, from_log_line
from tui.collectors.probes import Prober
from tui.config import DeploymentConfig, HostConfig, Settings
from tui.lifecycle.flags import current_values
from tui.lifecycle.presets import FlagSpec, Preset, get_preset
from tui.lifecycle.reducer import LifecycleState, MemoryObserved, initial, reduce, reduce_lines
from tui.lifecycle.release import attribute
from tui.managers import LockInfo, Manager, ManagerError
from tui.managers.none import NoManager
from tui.managers.process import ProcessManager
from tui.model import (
    ActionTaken,
    Attribution,
    Event,
    Failure,
    GpuSnapshot,
    LogLine,
    NewsResumed,
    NewsStopped,
    Phase,
    ProbeResult,
    Snapshot,
    ThroughputSample,
    UnitObserved,
    UnitState,
)
from tui.transport import Transport, TransportError
from tui.transport.local import LocalTransport

LOG_BUFFER = 50_000
_LISTENING = re.compile(r"Uvicorn running on \S+?://\S+?:(\d+)")
HISTORY = 600  # samples kept per series: 10 minutes at 1 Hz, fixed memory


@dataclass(frozen=True, slots=True)
class Update:
    """What changed, for a front end to re-render: kind is phase | logs | gpus | throughput | collector."""

    kind: str
    payload: Any = None


#: GPU panels redraw once a second; the release wait of a restart queries the GPUs itself, every 200 ms
GPU_INTERVAL_S = 1.0
#: the unit is read every 0.5 s and the GPUs sampled every second: this long without a reading, what is shown is
#: old news and is said to be (a half-open SSH connection otherwise froze the screen on READY for 40 s)
STALE_AFTER_S = 5.0


@dataclass
class GpuHistory:
    mem: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    util: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))


def make_transport(host: HostConfig) -> Transport:
    if host.is_local:
        return LocalTransport()
    from tui.transport.ssh import SshTransport

    return SshTransport(host.ssh, config=[host.ssh_config] if host.ssh_config else ())


class Watch:
    def __init__(self, settings: Settings, name: str, dep: DeploymentConfig, *,
                 transport: Transport | None = None) -> None:
        self.settings = settings
        self.name = name
        self.dep = dep
        self.host = settings.host(dep.host)
        self.host_name = dep.host_label
        self.preset: Preset = get_preset(dep.preset)
        self.flag_specs: list[FlagSpec] = [*self.preset.flags, *(f.spec() for f in dep.extra_flags)]
        self.transport = transport or make_transport(self.host)
        self.manager: Manager = self._make_manager()
        self.prober = Prober(dep.endpoint, timeout=settings.probe.timeout_s,
                             tokens=settings.probe.generation_tokens, health_path=self.preset.health_path,
                             models_path=self.preset.models_path)
        self.state: LifecycleState = initial(logs_available=dep.manager != "none",
                                             stall_after=settings.probe.stall_after_s)
        self.gpus: GpuSnapshot | None = None
        self.gpu_history: dict[int, GpuHistory] = {}
        self.throughput: ThroughputSample | None = None
        self.tps_history: deque[tuple[float, float]] = deque(maxlen=HISTORY)
        self.logs: deque[LogLine] = deque(maxlen=LOG_BUFFER)
        self.collector_errors: dict[str, str] = {}
        #: the unit cannot be read and waiting will not help (unknown host key, unit not found, sudo refused)
        self.permanent_error: Exception | None = None
        #: wall time of the last successful reading of the unit: what the phase shown is as old as
        self.unit_seen_at: float | None = None
        self._news_out = False
        self._poll_seq = 0
        self._applied_seq = 0
        self._replayed = ""  # the ended run whose log was read back at first sight
        #: another bringup's restart, start or stop in progress on this deployment, from its lock record
        self.other_holder: LockInfo | None = None
        self._holder_at = 0.0
        self._me = f"{getpass.getuser()}@{socket.gethostname()}"
        self._last_line_mono = 0.0
        self.metrics_state = "unknown"  # unknown | on | off
        #: each GPU's memory before the last start, kept on disk: a `bringup start` after a stop it did not see (a
        #: separate `bringup stop`, a `systemctl stop` by hand) knows no old PIDs, and without this it would take
        #: memory still being released for another tenant's and start into a CUDA OOM
        self.baseline_path = settings.state_path() / "deployments" / name / "gpu-baseline.json"
        self.baseline_mib: dict[int, float] = self._load_baseline()
        self._listeners: list[Callable[[Update], None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._unit_poke = asyncio.Event()
        self._unit_changed = asyncio.Event()
        self._flush_at: asyncio.TimerHandle | None = None
        self._lines_due: list[LogLine] = []
        self._changed = asyncio.Event()
        self._metrics = MetricsRates()
        self._gpu_source: SmiSource | NvmlSource | None = None
        self._gpu_error = ""
        self.paused = False
        self._forwarded = False
        #: processes of the current run, and of the run before it (its memory may still be being released)
        self.run_pids: set[int] | None = set()
        self.previous_pids: set[int] = set()
        self._pids_inv = ""
        self._pids_at = 0.0
        self._log_batch: list[LogLine] = []
        self.last_probe: ProbeResult | None = None
        #: (invocation, port) from the server's own "Uvicorn running on http://HOST:PORT" line
        self.listening: tuple[str, int] | None = None

    # ------------------------------------------------------------------ construction

    def _make_manager(self) -> Manager:
        if self.dep.manager == "process":
            root = self.host.state_dir or str(self.settings.state_path())
            run_dir = str(Path(root).expanduser() / "deployments" / self.name)
            return ProcessManager(self.transport, run_dir, self.dep.command, self.dep.env,
                                  stop_timeout=self.dep.stop_timeout_s)
        if self.dep.manager == "none":
            return NoManager()
        from tui.managers.systemd import SystemdManager

        return SystemdManager(self.transport, self.dep.unit, sudo=self.host.sudo, stop_timeout=self.dep.stop_timeout_s)

    def _load_baseline(self) -> dict[int, float]:
        try:
            raw = json.loads(self.baseline_path.read_text())
            return {int(k): float(v) for k, v in raw.items()}
        except (OSError, ValueError, TypeError, AttributeError):  # none yet, or not ours to trust
            return {}

    def save_baseline(self, snap: GpuSnapshot) -> None:
        """Each GPU's memory now, just before a start: what "released" means for the next stop."""
        self.baseline_mib = {g.index: g.mem_used_mib for g in snap.gpus if g.mem_used_mib is not None}
        with contextlib.suppress(OSError):  # a read-only state dir loses only this safeguard, not the start
            self.baseline_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.baseline_path.with_name(f".{self.baseline_path.name}.tmp")
            tmp.write_text(json.dumps(self.baseline_mib))
            tmp.replace(self.baseline_path)

    def named(self, failure: Failure | None) -> Failure | None:
        """The failure with this deployment's name in its hint, where the hint says `<deployment>`: a command to
        copy should be one that runs."""
        if failure is None or "<deployment>" not in failure.hint:
            return failure
        return replace(failure, hint=failure.hint.replace("<deployment>", self.name))

    def subscribe(self, fn: Callable[[Update], None]) -> None:
        self._listeners.append(fn)

    def _emit(self, kind: str, payload: Any = None) -> None:
        self._changed.set()
        for fn in list(self._listeners):
            fn(Update(kind, payload))

    def feed(self, ev: Event | MemoryObserved) -> None:
        """Apply one event to the reducer; tell listeners when the phase picture changed."""
        if self._lines_due and not isinstance(ev, LogLine):
            self._feed_due_lines()  # events keep their order
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

    def _phase_maybe_changed(self, before: LifecycleState) -> None:
        if (self.state.phase != before.phase or self.state.timeline != before.timeline
                or self.state.failure != before.failure or self.state.invocation != before.invocation):
            self._emit("phase", self.state)

    # ------------------------------------------------------------------ lifecycle of the watch

    async def connect_endpoint(self) -> None:
        """An endpoint on the remote host's loopback is reached through a port forward on the SSH connection."""
        forward = getattr(self.transport, "forward", None)
        u = urlsplit(self.dep.endpoint)
        if forward is None or u.hostname not in ("127.0.0.1", "localhost", "::1") or self._forwarded:
            return
        local = await forward(u.hostname, u.port or (443 if u.scheme == "https" else 80))
        await self.prober.close()
        self.prober = Prober(f"{u.scheme}://127.0.0.1:{local}{u.path}", timeout=self.settings.probe.timeout_s,
                             tokens=self.settings.probe.generation_tokens, health_path=self.preset.health_path,
                             models_path=self.preset.models_path)
        self._forwarded = True

    async def start(self) -> None:
        with contextlib.suppress(TransportError):
            await self.connect_endpoint()
        for name, coro in (("unit", self._unit_loop()), ("logs", self._log_loop()), ("probe", self._probe_loop()),
                           ("gpus", self._gpu_loop()), ("metrics", self._metrics_loop()),
                           ("news", self._news_loop())):
            self._tasks.append(asyncio.create_task(self._guard(name, coro), name=f"bringup-{name}"))

    async def close(self) -> None:
        """Stop every collector and the commands they run. Bounded: a caller (a CLI about to exit, a console
        quitting) must never wait on a collector that does not stop. Nothing is delivered after close: a console
        switching deployments must not get the old one's last lines."""
        self._listeners.clear()
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        self._lines_due, self._log_batch = [], []
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5.0)
        self._tasks.clear()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(3.0):
                await self.prober.close()
        if isinstance(self._gpu_source, NvmlSource):
            self._gpu_source.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(3.0):
                await self.transport.close()

    async def _guard(self, name: str, coro: Any) -> None:
        """A collector that fails reports its error and is restarted; it never takes the engine down."""
        backoff = 1.0
        while True:
            try:
                await coro
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a collector must never kill the watch
                self.collector_errors[name] = f"{type(e).__name__}: {e}"
                self._emit("collector", (name, self.collector_errors[name]))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30)
                coro = getattr(self, f"_{name}_loop")()

    # ------------------------------------------------------------------ collectors

    async def poll_unit(self) -> UnitState:
        # readings overlap (the unit loop and a restart both ask): one asked before a newer one that has already
        # been applied is old news, and applied after it would take the run back (the old run, inactive, after
        # ours was seen running)
        self._poll_seq += 1
        seq = self._poll_seq
        unit = await self.manager.state()
        if seq < self._applied_seq and self.state.unit is not None:
            return self.state.unit
        self._applied_seq = seq
        where = getattr(self.manager, "log_source", None)
        if where is not None and unit.invocation:
            # the failure of a run with no recognised error line says where its whole log is
            src = where(unit.invocation)
            if src != self.state.log_source:
                self.state = replace(self.state, log_source=src)
        seen = self.state.unit
        if (not unit.running and unit.invocation and unit.invocation != self._replayed
                and (seen is None or (seen.invocation != unit.invocation and unit.active != "deactivating"))):
            # first look at a run that has already ended (at start, or a run that came and went between two
            # readings: a server that dies at once): its log tells how it ended (a crash's traceback, the phases
            # it went through), so read that before the unit's "not running"; with its flags known, so a
            # failure's hint is the one the live console gave (DFLASH + CUDA graphs, ...)
            self._replayed = unit.invocation
            if unit.argv:
                self.state = replace(self.state, flags=tuple(current_values(unit.argv, self.preset.flags).items()))
            await self.replay_history(unit.invocation, ended=True)
        prev = self.state.unit
        self.unit_seen_at = time.time()
        if self._news_out:
            self._news_out = False
            self.feed(NewsResumed(self.unit_seen_at))
        self.feed(UnitObserved(self.unit_seen_at, unit))
        if prev is None or (prev.invocation, prev.running) != (unit.invocation, unit.running):
            self._unit_changed.set()
        return unit

    async def replay_history(self, invocation: str, ended: bool = False) -> None:
        """Read a run's log so far. For a run that has ended, its own ready line is the evidence it was ready (a
        generation can no longer be asked of it, and no older process can answer for it any more)."""
        read_log = getattr(self.manager, "read_log", None)
        if read_log is None:
            return
        lines: list[LogLine] = await read_log(invocation)
        probe = self.state.require_probe
        if ended:
            self.state = replace(self.state, require_probe=False)
        self._note_listening(lines)
        self.feed_lines(lines)
        self.state = replace(self.state, require_probe=probe)
        self.logs.extend(lines)
        tp = self._last_log_sample(lines, "throughput")
        if tp is not None:
            self.throughput = tp
        if lines:
            self._emit("logs", lines)

    async def refresh_pids(self, unit: UnitState) -> None:
        """Which processes are this run's (for GPU memory attribution and the release wait); every few seconds."""
        if unit.invocation != self._pids_inv or not unit.running:
            if self.run_pids:
                self.previous_pids = set(self.run_pids)
            self.run_pids = set() if self.run_pids is not None else None
            self._pids_inv = unit.invocation if unit.running else ""
            self._pids_at = 0.0
        if not unit.running or time.monotonic() - self._pids_at < 3.0:
            return
        self._pids_at = time.monotonic()
        try:
            self.run_pids = await self.manager.pids(unit)
        except (TransportError, ManagerError, OSError):
            return

    def poke_unit(self) -> None:
        self._unit_poke.set()

    async def refresh_holder(self) -> None:
        """Who else holds the deployment's lock (a restart, start or stop by another bringup): named in the
        console while it happens, with what it changes, instead of phases moving for no visible reason."""
        if time.monotonic() - self._holder_at < 2.0:
            return
        self._holder_at = time.monotonic()
        try:
            h = await self.manager.lock("watch").holder()
        except (TransportError, ManagerError, OSError):
            return
        if h is not None and h.pid == os.getpid() and h.who == self._me:
            h = None  # our own restart: its steps are shown already
        if h != self.other_holder:
            self.other_holder = h
            self._emit("holder", h)

    async def _unit_loop(self) -> None:
        if not self.manager.can_control:
            return
        while True:
            try:
                unit = await self.poll_unit()
                self.collector_errors.pop("unit", None)
                self.permanent_error = None
                await self.refresh_pids(unit)
                await self.refresh_holder()
            except (TransportError, ManagerError, OSError) as e:
                self.collector_errors["unit"] = str(e)
                self.permanent_error = e if getattr(e, "permanent", False) else None
                self._emit("collector", ("unit", str(e)))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await self._unit_poke.wait()
            self._unit_poke.clear()

    async def _news_loop(self) -> None:
        """An outage begins at the last reading: once news has stopped for longer than a few readings, the
        timeline gets a segment of its own (the unit loop itself is stuck in the read that hangs)."""
        while True:
            seen = self.unit_seen_at
            if (seen is not None and not self._news_out and self.manager.can_control
                    and time.time() - seen > STALE_AFTER_S):
                self._news_out = True
                self.feed(NewsStopped(seen, f"no news from {self.host_name}"))
            await asyncio.sleep(1.0)

    async def _log_loop(self) -> None:
        """Follows the current invocation's log; moves to the next one when the invocation changes."""
        following = ""
        task: asyncio.Task[None] | None = None
        try:
            while True:
                unit = self.state.unit
                if unit is not None and unit.running and unit.invocation and unit.invocation != following:
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await task
                    following = unit.invocation
                    task = asyncio.create_task(self._follow(unit))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2.0):
                        await self._unit_changed.wait()
                self._unit_changed.clear()
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _follow(self, unit: UnitState) -> None:
        stream = self.manager.follow(unit)
        loop = asyncio.get_running_loop()
        try:
            async for line in stream:
                # lines already read arrive here without the loop running in between: they are fed to the
                # reducer together, right after (call_soon), which costs no latency and far less per line
                self._lines_due.append(line)
                if len(self._lines_due) == 1:
                    loop.call_soon(self._feed_due_lines)
                elif len(self._lines_due) >= 250:  # a long burst: let the screen and the keys in
                    self._feed_due_lines()
                    await asyncio.sleep(0)
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]

    def _feed_due_lines(self) -> None:
        """The lines read since the loop last ran, to the reducer and the log buffers together."""
        lines, self._lines_due = self._lines_due, []
        if not lines:
            return
        self._last_line_mono = time.monotonic()
        self._note_listening(lines)
        self.feed_lines(lines)
        self.logs.extend(lines)
        self._log_batch.extend(lines)
        if len(self._log_batch) >= 1000:
            self._flush_logs()
        elif self._flush_at is None:
            self._flush_at = asyncio.get_running_loop().call_later(0.05, self._flush_logs)
        if self.metrics_state != "on":  # the log's own throughput lines, when /metrics says nothing
            for word in ("throughput", "acceptance"):  # the newest sample of each kind in this batch
                tp = self._last_log_sample(lines, word)
                if tp is not None:
                    self._set_throughput(tp, merge=True)

    def _note_listening(self, lines: Sequence[LogLine]) -> None:
        for line in lines:
            if "Uvicorn running on" in line.text:
                m = _LISTENING.search(line.text)
                if m:
                    self.listening = (line.invocation, int(m[1]))

    def endpoint_mismatch(self) -> str:
        """The server says where it listens; when that is not the configured endpoint's port, probes can never
        succeed and the run only looks hung: say so, with what to change."""
        if self.listening is None or self.listening[0] != self.state.invocation:
            return ""
        configured = urlsplit(self.dep.endpoint)
        port = configured.port or (443 if configured.scheme == "https" else 80)
        if self.listening[1] == port:
            return ""
        return (f"the server listens on port {self.listening[1]}, but the endpoint is {self.dep.endpoint}: "
                f"set endpoint (or the server's --port) so they agree")

    def stall_note(self) -> str:
        """The console's STALLED, in words a headless command prints: "still loading" and "hung" must not look
        the same there either."""
        s = self.state
        if s.stalled_for is None:
            return ""
        return (f"STALLED in {s.phase}: no log line or GPU memory change for {s.stalled_for:.0f} s "
                "(hung, or a very slow step?)")

    def _last_log_sample(self, lines: Sequence[LogLine], word: str) -> ThroughputSample | None:
        """The newest line with `word` that parses: a Prefill line says "input throughput" and is no sample."""
        for line in reversed(lines):
            if word in line.text:
                tp = from_log_line(self.preset, line.text, line.at)
                if tp is not None:
                    return tp
        return None

    def _flush_logs(self) -> None:
        """Log lines reach listeners in batches, 50 ms after the first line of a batch: cheap to render, nothing
        waits for a next line, and a quiet log costs no wake-ups at all."""
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        if self._log_batch:
            batch, self._log_batch = self._log_batch, []
            self._emit("logs", batch)

    def _set_throughput(self, tp: ThroughputSample, merge: bool = False) -> None:
        if merge and self.throughput is not None and tp.tokens_per_s is None:
            tp = replace(self.throughput, accept_len=tp.accept_len or self.throughput.accept_len, at=tp.at)
        self.throughput = tp
        if tp.tokens_per_s is not None:
            self.tps_history.append((tp.at, tp.tokens_per_s))
        self._emit("throughput", tp)

    async def _probe_loop(self) -> None:
        interval = self.settings.probe.interval_s
        last_gen = 0.0
        while True:
            s = self.state
            unit_running = s.unit is None or s.unit.running or self.dep.manager == "none"
            if self.paused or not unit_running or s.phase in (Phase.FAILED, Phase.STOPPING):
                await asyncio.sleep(interval)
                continue
            if s.phase == Phase.READY:
                r = await self.prober.health()
                self.feed(r)
                self._emit("probe", r)
                if time.time() - last_gen > 30:
                    g = await self.prober.generate()
                    last_gen = time.time()
                    self.feed(g)
                    self._emit("probe", g)
                await asyncio.sleep(interval * 2)
                continue
            if s.ready_line_at is not None or not s.logs_available or s.phase == Phase.WARMUP:
                h = await self.prober.health()
                self.feed(h)
                self._emit("probe", h)
                if s.ready_line_at is not None or not s.logs_available:
                    g = await self.prober.generate()
                    last_gen = time.time()
                    self.feed(g)
                    self._emit("probe", g)
                    if g.ok:
                        continue
            else:
                c = await self.prober.connect()
                self.feed(c)
                self._emit("probe", c)
            await asyncio.sleep(interval / 2 if s.ready_line_at is not None else interval)

    def _gpu_source_for_host(self) -> SmiSource | NvmlSource | None:
        src = self.host.gpu_source
        if src == "none":
            self._gpu_error = "GPU telemetry off for this host"
            return None
        if src in ("auto", "nvml") and self.host.is_local:
            try:
                return NvmlSource()
            except NvmlUnavailable as e:
                self._gpu_error = str(e)
                if src == "nvml":
                    return None
        return SmiSource(self.transport, self.host.nvidia_smi, interval_ms=int(GPU_INTERVAL_S * 1000))

    async def _gpu_loop(self) -> None:
        self._gpu_source = self._gpu_source_for_host()
        src = self._gpu_source
        if src is None:
            self._gpu_snapshot(GpuSnapshot(at=time.time(), error=self._gpu_error))
            return
        if isinstance(src, NvmlSource):
            while True:
                snap = await asyncio.to_thread(src.sample)
                self._gpu_snapshot(snap)
                await asyncio.sleep(GPU_INTERVAL_S)
        else:
            async for snap in src.stream():
                if snap.error and ("No such file" in snap.error or "cannot run" in snap.error):
                    snap = replace(snap, error=(self._gpu_error + "; " if self._gpu_error else "")
                                   + "nvidia-smi not found")
                self._gpu_snapshot(snap)

    def observe_gpus(self, snap: GpuSnapshot) -> None:
        """A sample taken outside the stream (the release wait's own queries), shown like a streamed one unless
        the stream has a newer one."""
        if self.gpus is None or snap.at >= self.gpus.at:
            self._gpu_snapshot(snap)

    def _gpu_snapshot(self, snap: GpuSnapshot) -> None:
        if snap.error and self.gpus is not None and self.gpus.gpus and snap.at - self.gpus.at < 5:
            self.collector_errors["gpus"] = snap.error
            return
        self.gpus = snap
        for g in snap.gpus:
            h = self.gpu_history.setdefault(g.index, GpuHistory())
            if g.mem_used_mib is not None:
                h.mem.append(g.mem_used_mib)
            if g.util_pct is not None:
                h.util.append(g.util_pct)
        used = self.deployment_memory_mib(snap)
        if used is not None:
            self.feed(MemoryObserved(snap.at, used))
        self._emit("gpus", snap)

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]:
        snap = snap or self.gpus
        if self.dep.gpus:
            return list(self.dep.gpus)
        return [g.index for g in snap.gpus] if snap else []

    def deployment_memory_mib(self, snap: GpuSnapshot) -> float | None:
        idx = set(self.deployment_gpus(snap))
        vals = [g.mem_used_mib for g in snap.gpus if g.index in idx and g.mem_used_mib is not None]
        return sum(vals) if vals else None

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None:
        """A GPU snapshot no older than `max_age` seconds (from the stream, or a one-shot query)."""
        if self.gpus is not None and time.time() - self.gpus.at <= max_age and self.gpus.gpus:
            return self.gpus
        if self._gpu_source is None:
            self._gpu_source = self._gpu_source_for_host()
        src = self._gpu_source
        if src is None:
            return None
        snap = await asyncio.to_thread(src.sample) if isinstance(src, NvmlSource) else await src.once()
        return snap

    async def scrape_metrics(self) -> ThroughputSample | None:
        """One scrape of /metrics; sets `metrics_state` (off: the server serves none) and the throughput.
        Raises httpx.HTTPError or TimeoutError when the endpoint does not answer."""
        async with asyncio.timeout(self.settings.probe.timeout_s):
            r = await self.prober.client.get("/metrics")
        if r.status_code != 200:
            self.metrics_state = "off"
            return None
        tp = self._metrics.sample(r.text, time.time())
        if tp is not None and (tp.tokens_per_s is not None or tp.running is not None):
            self.metrics_state = "on"
            self._set_throughput(tp)
            return tp
        return None

    async def _metrics_loop(self) -> None:
        while True:
            if self.state.phase != Phase.READY or self.paused:
                await asyncio.sleep(1.0)
                continue
            try:
                await self.scrape_metrics()
            except (httpx.HTTPError, TimeoutError):
                await asyncio.sleep(2.0)
                continue
            await asyncio.sleep(1.0)

    # ------------------------------------------------------------------ actions and views

    def action(self, name: str) -> None:
        self.feed(ActionTaken(time.time(), name))
        self.poke_unit()

    async def argv(self) -> list[str]:
        return await self.manager.read_argv()

    async def flag_values(self) -> dict[str, str | None]:
        return current_values(await self.argv(), self.flag_specs)

    def snapshot(self, now: float | None = None) -> Snapshot:
        s = self.state
        if now is not None and now > s.now:
            s = replace(s, now=now)
        unit = s.unit
        notes = [f"{k}: {v}" for k, v in self.collector_errors.items()]
        link = getattr(self.transport, "status", "connected")
        if link != "connected" and not self.host.is_local:
            notes.insert(0, f"ssh {self.host.ssh}: {link}")
        mismatch = self.endpoint_mismatch()
        if mismatch:
            notes.insert(0, f"probe: {mismatch}")  # the console shows the probe's notes in the lifecycle panel
        if self.other_holder is not None:
            notes.insert(0, f"another bringup is at work: {self.other_holder.describe()}")
        phase, stale, last = s.phase, "", None
        clock = now if now is not None else time.time()
        if self.manager.can_control:
            if self.unit_seen_at is None:
                phase, last = Phase.UNKNOWN, None
                err = self.collector_errors.get("unit", "")
                stale = f"connecting to {self.host_name}" + (f": {err}" if err else "")
            elif clock - self.unit_seen_at > STALE_AFTER_S:
                phase, last = Phase.UNKNOWN, s.phase
                stale = (f"no news from {self.host_name} for {clock - self.unit_seen_at:.0f} s "
                         f"(last seen: {s.phase})")
        gpus_stale = None
        if self.gpus is not None and self.gpus.gpus and clock - self.gpus.at > STALE_AFTER_S:
            gpus_stale = clock - self.gpus.at
        if self.metrics_state == "off":
            how = "--enable-metrics" if self.preset.name == "sglang" else "stats enabled"
            notes.append(f"no metrics: start the server with {how} for tokens/s from /metrics")
        return Snapshot(
            stale=stale, gpus_stale_for=gpus_stale, last_phase=last,
            deployment=self.name, host=self.host_name, phase=phase, invocation=s.invocation,
            timeline=s.timeline, failure=self.named(s.failure), stalled_for=s.stalled_for, unit=unit, gpus=self.gpus,
            throughput=self.throughput, flags=unit.argv if unit else (), notes=tuple(notes),
            endpoint=describe_probe(self.current_probe()), attribution=self.attribution())

    def current_probe(self) -> ProbeResult | None:
        """The last probe, if it was sent after the current run started: the old process's `/health ok` is no
        reading of a run that is starting."""
        p, s = self.last_probe, self.state
        if p is None or s.invocation_started is None or p.sent_at >= s.invocation_started:
            return p
        return None

    def attribution(self) -> Attribution | None:
        if self.gpus is None or not self.gpus.gpus:
            return None
        unit = self.state.unit
        return attribute(self.gpus, self.deployment_gpus(), self.run_pids, self.previous_pids,
                         running=unit is not None and unit.running)

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


def describe_probe(p: ProbeResult | None) -> str:
    if p is None:
        return ""
    what = {"connect": "connect", "health": "/health", "models": "/v1/models", "generate": "generation"}[p.kind] \
        if p.kind in ("connect", "health", "models", "generate") else p.kind
    if p.ok:
        # a slow answer is worth its figure; a fast one's would change at every probe and redraw the panel
        lat = f" {p.latency_s:.1f}s" if p.latency_s is not None and p.latency_s >= 0.1 else ""
        return f"{what} ok{lat}"
    if p.status is not None:
        return f"{what} {p.status}"
    return f"{what}: {'refused' if 'refused' in p.detail.lower() or 'connect' in p.detail.lower() else p.detail[:60]}"
