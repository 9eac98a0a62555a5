"""What a front end shows, computed from the engine's state: the snapshot, and the words for what the phase alone
does not say (a probe's answer, an endpoint that cannot match, a stall, why the picture is old news).

Plain functions of plain data: `build_snapshot` reads the reducer's state and the streams' `Readings`, which the
engine gathers; the console, `bringup status` and `bringup wait` all say these things in exactly these words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from urllib.parse import urlsplit

from tui.config.parts import HostConfig
from tui.guard.numbers import whole_or_none
from tui.lifecycle.crash_loop import crash_loop
from tui.lifecycle.lines import latest_progress
from tui.lifecycle.presets import Preset
from tui.lifecycle.presets.facts import ReleaseMatch, resolve
from tui.lifecycle.reducer import LifecycleState, reduce
from tui.lifecycle.state import FailedRun
from tui.model import (
    Attribution,
    CrashLoop,
    Failure,
    GpuSnapshot,
    LockInfo,
    LogLine,
    NamedHolder,
    NoEta,
    Note,
    NoteSource,
    Phase,
    PhaseEta,
    ProbeResult,
    Snapshot,
    ThroughputSample,
    Tick,
)
from tui.transport import Transport, link_status

from .throughput import MetricsState

#: the unit is read every 0.5 s and the GPUs sampled every second: this long without a reading, what is shown is
#: old news and is said to be (a half-open SSH connection otherwise froze the screen on READY for 40 s)
STALE_AFTER_S = 5.0

_LISTENING = re.compile(r"Uvicorn running on \S+?://\S+?:(\d+)")
_PROBE_WORDS = {"connect": "connect", "health": "/health", "models": "/v1/models", "generate": "generation"}


def find_listening(lines: Sequence[LogLine]) -> tuple[str, int] | None:
    """(invocation, port) from the newest of the server's own "Uvicorn running on http://HOST:PORT" lines."""
    found = None
    for line in lines:
        if "Uvicorn running on" in line.text:
            m = _LISTENING.search(line.text)
            port = whole_or_none(m[1], low=1, high=65535, text=True) if m else None
            if port is not None:
                found = (line.invocation, port)
    return found


def endpoint_mismatch(listening: tuple[str, int] | None, invocation: str, endpoint: str) -> str:
    """The server says where it listens; when that is not the configured endpoint's port, probes can never
    succeed and the run only looks hung: say so, with what to change."""
    if listening is None or listening[0] != invocation:
        return ""
    configured = urlsplit(endpoint)
    port = configured.port or (443 if configured.scheme == "https" else 80)
    if listening[1] == port:
        return ""
    return (f"the server listens on port {listening[1]}, but the endpoint is {endpoint}: "
            f"set endpoint (or the server's --port) so they agree")


def stall_note(s: LifecycleState) -> str:
    """The console's STALLED, in words a headless command prints: "still loading" and "hung" must not look
    the same there either."""
    if s.stalled_for is None:
        return ""
    return (f"STALLED in {s.phase}: no log line or GPU memory change for {s.stalled_for:.0f} s "
            "(hung, or a very slow step?)")


def current_probe(p: ProbeResult | None, s: LifecycleState) -> ProbeResult | None:
    """The last probe, if it was sent after the current run started: the old process's `/health ok` is no
    reading of a run that is starting."""
    if p is None or s.invocation_started is None or p.sent_at >= s.invocation_started:
        return p
    return None


def describe_probe(p: ProbeResult | None) -> str:
    if p is None:
        return ""
    what = _PROBE_WORDS.get(p.kind, p.kind)
    if p.ok:
        # a slow answer is worth its figure; a fast one's would change at every probe and redraw the panel
        lat = f" {p.latency_s:.1f}s" if p.latency_s is not None and p.latency_s >= 0.1 else ""
        return f"{what} ok{lat}"
    if p.status is not None:
        return f"{what} {p.status}"
    return f"{what}: {'refused' if 'refused' in p.detail.lower() or 'connect' in p.detail.lower() else p.detail[:60]}"


def named(failure: Failure | None, deployment: str) -> Failure | None:
    """The failure with the deployment's name in its hint, where the hint says `<deployment>`: a command to copy
    should be one that runs."""
    if failure is None or "<deployment>" not in failure.hint:
        return failure
    return replace(failure, hint=failure.hint.replace("<deployment>", deployment))


@dataclass(frozen=True, slots=True)
class Readings:
    """What the streams have read, beside the reducer's state: everything a snapshot says that the phase does not.
    Gathered by the engine from its parts, so this module reads no engine."""

    deployment: str
    host_name: str
    host: HostConfig
    transport: Transport
    preset: Preset
    endpoint: str
    #: whether the unit is read at all (a deployment without a manager has no phase from it, and no staleness)
    can_control: bool
    unit_seen_at: float | None
    other_holder: LockInfo | None
    collector_errors: Mapping[str, str]
    metrics_state: MetricsState
    listening: tuple[str, int] | None
    last_probe: ProbeResult | None
    gpus: GpuSnapshot | None
    gpu_history: Mapping[int, tuple[float, ...]]
    attribution: Attribution | None
    throughput: ThroughputSample | None
    tps_history: tuple[tuple[float, float], ...]
    #: the start-up's ETA from the deployment's run history, for a state and its latest progress line, at a time
    eta: Callable[[LifecycleState, str, float], PhaseEta | NoEta | None]
    #: what the manager runs (its unit, container or command)
    target: str = ""
    #: the deployment's GPUs, and the memory other deployments of the host hold on them
    deployment_gpus: tuple[int, ...] = ()
    gpu_holders: tuple[NamedHolder, ...] = ()
    #: the runs that failed one after another before the current one, where the state knows none (the run
    #: history's, engine/history.py `RunRecorder.earlier`)
    earlier: Callable[[LifecycleState], tuple[FailedRun, ...]] = lambda s: s.earlier


def notes(e: Readings, s: LifecycleState) -> tuple[Note, ...]:
    """Everything worth a line beside the phase, the most pressing first."""
    out: list[Note] = []
    if e.other_holder is not None:
        out.append(Note(NoteSource.HOLDER, f"another bringup is at work: {e.other_holder.describe()}"))
    mismatch = endpoint_mismatch(e.listening, s.invocation, e.endpoint)
    if mismatch:
        out.append(Note(NoteSource.PROBE, f"probe: {mismatch}"))
    link = link_status(e.transport)
    if link != "connected" and not e.host.is_local:
        out.append(Note(NoteSource.LINK, f"ssh {e.host.ssh}: {link}"))
    out += [Note(NoteSource(k), f"{k}: {v}") for k, v in e.collector_errors.items()]
    if e.metrics_state == MetricsState.OFF:
        hint = e.preset.metrics_hint
        how = f"{hint.advice} for tokens/s from /metrics" if hint is not None else "the server serves no /metrics"
        out.append(Note(NoteSource.THROUGHPUT, f"no metrics: {how}"))
    return tuple(out)


@lru_cache(maxsize=64)
def resolved_release(server: str, version: str) -> ReleaseMatch:
    """The facts for a release the server named: resolved once per release, not at every snapshot."""
    return resolve(server, version)


def build_snapshot(s: LifecycleState, e: Readings, now: float | None = None) -> Snapshot:
    if now is not None:
        s = reduce(s, Tick(now), e.preset)  # the reducer's clock, moved to the moment shown (never back)
    unit = s.unit
    phase, stale, last = s.phase, "", None
    clock = now if now is not None else time.time()
    if e.can_control:
        if e.unit_seen_at is None:
            phase, last = Phase.UNKNOWN, None
            err = e.collector_errors.get("unit", "")
            stale = f"connecting to {e.host_name}" + (f": {err}" if err else "")
        elif clock - e.unit_seen_at > STALE_AFTER_S:
            phase, last = Phase.UNKNOWN, s.phase
            stale = f"no news from {e.host_name} for {clock - e.unit_seen_at:.0f} s (last seen: {s.phase})"
    gpus = e.gpus
    gpus_stale = None
    if gpus is not None and gpus.gpus and clock - gpus.at > STALE_AFTER_S:
        gpus_stale = clock - gpus.at
    return Snapshot(
        stale=stale, gpus_stale_for=gpus_stale, last_phase=last,
        deployment=e.deployment, host=e.host_name, phase=phase, invocation=s.invocation,
        timeline=s.timeline, failure=named(s.failure, e.deployment), stalled_for=s.stalled_for, unit=unit,
        gpus=gpus, throughput=e.throughput, flags=unit.argv if unit else (), notes=notes(e, s),
        endpoint=describe_probe(current_probe(e.last_probe, s)), attribution=e.attribution,
        latest_line=(latest := latest_progress(s.blocks.tail)), release_seen=s.release,
        eta=e.eta(s, latest, clock),
        release=resolved_release(e.preset.name, s.release.version) if s.release is not None else None,
        gpu_history=e.gpu_history, tps_history=e.tps_history, collector_errors=dict(e.collector_errors),
        crash_loop=_named_loop(crash_loop(replace(s, earlier=e.earlier(s))), e.deployment),
        server=e.preset.display_name or e.preset.name, target=e.target, deployment_gpus=e.deployment_gpus,
        gpu_holders=e.gpu_holders,
        memory_budget=e.preset.memory_budget.share(unit.argv if unit else ())
        if e.preset.memory_budget is not None else None)


def _named_loop(loop: CrashLoop | None, deployment: str) -> CrashLoop | None:
    """The loop's last failure with the deployment's name in its hint, as the failure shown is (`named`)."""
    if loop is None:
        return None
    last = named(loop.last, deployment)
    return replace(loop, last=last) if last is not None else loop
