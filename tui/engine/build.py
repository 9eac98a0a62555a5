"""What an engine is built from: the transport to the deployment's host, its service manager and its prober,
each chosen from the config. Kept apart from the engine so that what runs is not mixed with what is picked."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from tui.collectors.probes import Prober
from tui.config.deployments import DeploymentConfig
from tui.config.parts import HostConfig
from tui.config.settings import Settings
from tui.lifecycle.nodes import gpu_key
from tui.lifecycle.presets import Preset
from tui.managers import Manager
from tui.managers.multinode import MultiNodeManager, Node
from tui.managers.registry import Place, build_manager
from tui.transport import Forwarding, Transport
from tui.transport.local import LocalTransport

from .gpu_sampler import GpuSampler
from .host_gpus import HostGpuStream


def make_transport(host: HostConfig) -> Transport:
    if host.is_local:
        return LocalTransport()
    from tui.transport.ssh import SshTransport

    return SshTransport(host.ssh, config=[host.ssh_config] if host.ssh_config else ())


def make_manager(settings: Settings, name: str, dep: DeploymentConfig, host: HostConfig,
                 transport: Transport) -> Manager:
    """The manager of a deployment of one node, of its kind (managers/registry.py)."""
    return build_manager(dep, Place(settings, name, host, transport))


@dataclass
class NodeLink:
    """A node's host as a deployment over several nodes reaches it: its name, config, transport and GPU stream
    (the fleet's, shared with other deployments on that host, or the engine's own)."""

    name: str
    host: HostConfig
    transport: Transport
    gpus: HostGpuStream


def open_links(settings: Settings, dep: DeploymentConfig, transport: Transport
               ) -> tuple[list[NodeLink], list[NodeLink]]:
    """A deployment over several nodes watched alone: a connection and a GPU stream per node host (the head's
    connection is `transport`, the engine's own). Each node's link (head first), and the links opened, one per host
    (the engine's to close)."""
    by_host: dict[str, NodeLink] = {}
    for n in dep.nodes:
        if n.host not in by_host:
            cfg = settings.host(n.host)
            tr = transport if n.host == dep.host else make_transport(cfg)
            by_host[n.host] = NodeLink(n.host, cfg, tr, HostGpuStream(GpuSampler(cfg, tr)))
    return [by_host[n.host] for n in dep.nodes], list(by_host.values())


def make_multinode(settings: Settings, name: str, dep: DeploymentConfig, preset: Preset,
                   links: list[NodeLink]) -> MultiNodeManager:
    nodes = []
    for i, link in enumerate(links):
        one = dep.node(i)
        nodes.append(Node(link.name, make_manager(settings, f"{name}/node-{i}", one, link.host, link.transport),
                          flags=dep.nodes[i].flags))
    return MultiNodeManager(nodes, (*preset.node_flags, *(f.lstrip("-") for f in dep.node_flags)))


def gpu_keys(dep: DeploymentConfig) -> list[int]:
    """The deployment's GPUs as the tracker knows them: the indices on one node; keyed by node on several, where
    every node must list its GPUs for the list to be known (else: every GPU of the nodes' hosts)."""
    if not dep.nodes:
        return list(dep.gpus)
    if not all(n.gpus for n in dep.nodes):
        return []
    return [gpu_key(i, g) for i, n in enumerate(dep.nodes) for g in n.gpus]


def make_prober(settings: Settings, name: str, endpoint: str, preset: Preset) -> Prober:
    """The deployment's prober, its ledger shared with bringup's other processes on the deployment (a restart's
    proof, a status, another console: their generations are no throughput either)."""
    return Prober(endpoint, timeout=settings.probe.timeout_s, tokens=settings.probe.generation_tokens,
                  health_path=preset.health_path, models_path=preset.models_path,
                  generations_file=settings.state_path() / "deployments" / name / "generations")


async def forwarded_endpoint(transport: Transport, endpoint: str) -> str | None:
    """An endpoint on the remote host's loopback is reached through a port forward on the SSH connection: the
    local URL that reaches it, or None where the transport forwards nothing or the endpoint is not on loopback."""
    u = urlsplit(endpoint)
    if not isinstance(transport, Forwarding) or u.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    local = await transport.forward(u.hostname, u.port or (443 if u.scheme == "https" else 80))
    return f"{u.scheme}://127.0.0.1:{local}{u.path}"
