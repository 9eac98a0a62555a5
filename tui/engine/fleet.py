"""Many deployments at once: one engine per deployment, and per host one transport (one SSH connection) and one
GPU sampling stream, shared by every deployment on it.

The fleet overview watches every configured deployment; opening a connection and an `nvidia-smi` stream per
deployment would cost a host with four deployments four of each. Each engine still runs its own collectors as
tasks of their own, so a host that is down or slow to answer holds up only the rows it carries: its engines'
collectors retry with the transport's backoff while the others read on. Nothing here draws: `views()` is plain
data a front end turns into rows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from tui.config.demo import DEMO
from tui.config.parts import HostConfig
from tui.config.settings import Settings
from tui.lifecycle.lines import LineKind
from tui.lifecycle.release import Neighbours
from tui.model import LogLine, Snapshot
from tui.transport import Transport, link_status

from .build import NodeLink, make_transport
from .core import Engine
from .gpu_sampler import GpuSampler
from .host_gpus import HostGpuStream
from .updates import LogsRead, Update

#: log lines kept per deployment while the console shows another: opening a deployment shows its recent log
RECENT_LINES = 10_000
#: transport states that say nothing is wrong (yet): before the first use, a first connect under way, closing
_LINK_OK = ("connected", "not connected", "connecting", "closed")


@dataclass
class HostLink:
    """One host as the fleet reaches it: the transport and GPU stream its deployments share, and their names."""

    name: str
    config: HostConfig
    transport: Transport
    gpus: HostGpuStream
    deployments: list[str] = field(default_factory=list)

    @property
    def down(self) -> str:
        """Why the host cannot be reached now ("" when it can, or is not known not to): the SSH link's own word
        ("reconnecting (attempt 3): ... connection refused"). A local host is never down."""
        status = link_status(self.transport)
        return "" if self.config.is_local or status in _LINK_OK else status


@dataclass(frozen=True, slots=True)
class DeploymentView:
    """One deployment as the overview shows it: its snapshot, its GPUs, and whether its host is down."""

    snapshot: Snapshot
    gpus: tuple[int, ...]
    host_down: str


class Fleet:
    """The engines of `names` (every configured deployment but the demo, by default), built at once and started by
    `start()`; `close()` stops them all and then the hosts' connections."""

    def __init__(self, settings: Settings, names: Sequence[str] | None = None, *,
                 transport_for: Callable[[HostConfig], Transport] = make_transport) -> None:
        self.settings = settings
        self.hosts: dict[str, HostLink] = {}
        self.engines: dict[str, Engine] = {}
        self._recent: dict[str, deque[tuple[LogLine, LineKind]]] = {}
        self._starts: list[asyncio.Task[None]] = []
        for name in names if names is not None else deployment_names(settings):
            dep = settings.deployments[name]
            link = self._host_link(dep.host, transport_for)
            link.deployments.append(name)
            nodes = None
            if dep.multinode:  # every node's host is a link of the fleet's, shared like any other
                nodes = []
                for n in dep.nodes:
                    nl = self._host_link(n.host, transport_for)
                    if name not in nl.deployments:
                        nl.deployments.append(name)
                    nodes.append(NodeLink(n.host, nl.config, nl.transport, nl.gpus))
            engine = Engine(settings, name, dep, transport=link.transport, gpu_stream=link.gpus, node_links=nodes)
            engine.background = True  # until a console opens it (tui/console/viewer.py)
            if not dep.multinode:  # a node's GPUs and PIDs are keyed by node: its host's neighbours are not named
                engine.gpu.neighbours = partial(self.neighbours, name)
            self.engines[name] = engine
            recent: deque[tuple[LogLine, LineKind]] = deque(maxlen=RECENT_LINES)
            self._recent[name] = recent
            engine.subscribe(partial(_keep_lines, keep=recent))

    def _host_link(self, host: str, transport_for: Callable[[HostConfig], Transport]) -> HostLink:
        link = self.hosts.get(host)
        if link is None:
            config = self.settings.host(host)
            transport = transport_for(config)
            link = HostLink(host, config, transport, HostGpuStream(GpuSampler(config, transport)))
            self.hosts[host] = link
        return link

    def host_down(self, deployment: str) -> str:
        """Why a host of the deployment cannot be reached ("" when every one can): a node's host names itself."""
        dep = self.settings.deployments[deployment]
        if not dep.multinode:
            return self.link(deployment).down
        downs = [f"{n.host}: {d}" for n in dep.nodes if (d := self.hosts[n.host].down)]
        return "; ".join(dict.fromkeys(downs))

    def start(self) -> None:
        """Start every engine, each in a task of its own: an engine's start forwards its endpoint over its host's
        SSH connection, and a host that does not answer must not keep the others waiting."""
        for name, engine in self.engines.items():
            self._starts.append(asyncio.create_task(engine.start(), name=f"bringup-start-{name}"))

    def link(self, deployment: str) -> HostLink:
        return self.hosts[self.settings.deployments[deployment].host]

    def neighbours(self, deployment: str) -> Neighbours:
        """The other deployments on the deployment's host, as their engines know them now (no I/O): each one's
        processes (its unit's main PID, its run's processes and the last run's while it releases) and, for those
        running, their configured GPUs. A GPU panel names them instead of saying "other processes"."""
        host = self.settings.deployments[deployment].host
        pids: dict[int, str] = {}
        gpus: dict[int, tuple[str, ...]] = {}
        for name, e in self.engines.items():
            dep = self.settings.deployments[name]
            if name == deployment or dep.host != host or dep.multinode:
                continue
            unit = e.state.unit
            running = unit is not None and unit.running
            theirs = set(e.gpu.run_pids or ()) | e.gpu.previous_pids | {unit.main_pid if running and unit else 0}
            for pid in theirs - {0}:
                pids.setdefault(pid, name)
            for i in e.gpu.configured if running else ():
                gpus[i] = (*gpus.get(i, ()), name)
        return Neighbours(pids, gpus)

    def recent_lines(self, deployment: str) -> LogsRead:
        """The deployment's recent lines, with their kinds, as one update: what a console opening it shows first."""
        recent = self._recent.get(deployment, ())
        return LogsRead(tuple(line for line, _ in recent), tuple(kind for _, kind in recent))

    def views(self, now: float) -> list[DeploymentView]:
        """Every deployment as of `now`, in the config's order. No I/O: what the engines have read so far."""
        out = []
        for name, e in self.engines.items():
            out.append(DeploymentView(e.snapshot(now), tuple(e.deployment_gpus()), self.host_down(name)))
        return out

    async def close(self) -> None:
        """Bounded like an engine's close: the engines (concurrently), then each host's GPU stream and connection."""
        for t in self._starts:
            t.cancel()
        await asyncio.gather(*(e.close() for e in self.engines.values()), return_exceptions=True)
        for link in self.hosts.values():
            await link.gpus.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(3.0):
                    await link.transport.close()


def deployment_names(settings: Settings) -> list[str]:
    """The deployments an overview shows: every configured one but the built-in demo."""
    return [n for n in settings.deployments if n != DEMO]


def _keep_lines(update: Update, keep: deque[tuple[LogLine, LineKind]]) -> None:
    if isinstance(update, LogsRead):
        keep.extend(zip(update.lines, update.kinds, strict=True))
