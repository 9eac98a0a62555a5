"""What an engine is built from: the transport to the deployment's host, its service manager and its prober,
each chosen from the config. Kept apart from the engine so that what runs is not mixed with what is picked."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from tui.collectors.probes import Prober
from tui.config import DeploymentConfig, HostConfig, Settings
from tui.lifecycle.presets import Preset
from tui.managers import Manager
from tui.managers.none import NoManager
from tui.managers.process import ProcessManager
from tui.transport import Transport
from tui.transport.local import LocalTransport


def make_transport(host: HostConfig) -> Transport:
    if host.is_local:
        return LocalTransport()
    from tui.transport.ssh import SshTransport

    return SshTransport(host.ssh, config=[host.ssh_config] if host.ssh_config else ())


def make_manager(settings: Settings, name: str, dep: DeploymentConfig, host: HostConfig,
                 transport: Transport) -> Manager:
    if dep.manager == "process":
        root = host.state_dir or str(settings.state_path())
        run_dir = str(Path(root).expanduser() / "deployments" / name)
        return ProcessManager(transport, run_dir, dep.command, dep.env, stop_timeout=dep.stop_timeout_s)
    if dep.manager == "none":
        return NoManager()
    if dep.manager in ("docker", "compose"):
        return make_container_manager(settings, name, dep, host, transport)
    from tui.managers.systemd import SystemdManager

    return SystemdManager(transport, dep.unit, sudo=host.sudo, stop_timeout=dep.stop_timeout_s)


def make_container_manager(settings: Settings, name: str, dep: DeploymentConfig, host: HostConfig,
                           transport: Transport) -> Manager:
    """bringup's records of a container deployment live on the container's host: under the state dir here, and
    under the SSH user's home (a path relative to it) on another host, unless the host names its own."""
    root = host.state_dir or (str(settings.state_path()) if host.is_local else ".local/state/bringup")
    state_dir = str(Path(root).expanduser() / "deployments" / name) if host.is_local else f"{root}/deployments/{name}"
    if dep.manager == "compose":
        from tui.managers.compose import ComposeManager

        compose = dep.compose_command or (["podman-compose"] if dep.engine == "podman" else ["docker-compose"])
        return ComposeManager(transport, dep.compose_dir, dep.service, state_dir, engine=dep.engine,
                              compose=compose, container=dep.container, stop_timeout=dep.stop_timeout_s)
    from tui.managers.docker import DockerManager

    return DockerManager(transport, dep.container, state_dir, engine=dep.engine, image=dep.image,
                         run_args=dep.run_args, command=dep.command, stop_timeout=dep.stop_timeout_s)


def make_prober(settings: Settings, endpoint: str, preset: Preset) -> Prober:
    return Prober(endpoint, timeout=settings.probe.timeout_s, tokens=settings.probe.generation_tokens,
                  health_path=preset.health_path, models_path=preset.models_path)


async def forwarded_endpoint(transport: Transport, endpoint: str) -> str | None:
    """An endpoint on the remote host's loopback is reached through a port forward on the SSH connection: the
    local URL that reaches it, or None where the transport forwards nothing or the endpoint is not on loopback."""
    forward = getattr(transport, "forward", None)
    u = urlsplit(endpoint)
    if forward is None or u.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    local = await forward(u.hostname, u.port or (443 if u.scheme == "https" else 80))
    return f"{u.scheme}://127.0.0.1:{local}{u.path}"
