"""The one table of manager kinds: each deployment variant (deployments.py) and how its manager is built.

A new way to run servers is a manager module, a config variant and one entry here; nothing else asks which kind
a deployment is (the engine asks the manager what it can do: `can_control`, `sees_run`, `LogHistory`). A variant
without an entry fails loudly at build time, never silently as another kind, and a test checks that every
variant has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from tui.config.deployments import (
    ComposeDeployment,
    DeploymentConfig,
    DockerDeployment,
    NoManagerDeployment,
    ProcessDeployment,
    SlurmDeployment,
    SystemdDeployment,
)
from tui.config.parts import HostConfig
from tui.config.settings import Settings
from tui.managers import Manager
from tui.transport import Transport

D = TypeVar("D", bound=DeploymentConfig)


@dataclass(frozen=True)
class Place:
    """Where a deployment's manager works: the deployment's name (its records are kept under it), its host and
    the transport to that host, and the settings (bringup's state dir)."""

    settings: Settings
    name: str
    host: HostConfig
    transport: Transport

    def local_records(self) -> str:
        """The process manager's records (pid files, logs, flag history): under the host's state dir, else
        bringup's."""
        root = self.host.state_dir or str(self.settings.state_path())
        return str(Path(root).expanduser() / "deployments" / self.name)

    def host_records(self) -> str:
        """A container deployment's records live on the container's host: under the state dir here, and under the
        SSH user's home (a path relative to it) on another host, unless the host names its own."""
        local = self.host.is_local
        root = self.host.state_dir or (str(self.settings.state_path()) if local else ".local/state/bringup")
        return str(Path(root).expanduser() / "deployments" / self.name) if local else f"{root}/deployments/{self.name}"


def local_state_dirs(settings: Settings) -> list[tuple[str, Path]]:
    """Every directory on this machine that bringup keeps records in, with the config key that names it: bringup's
    own state dir and each local host's own (`[hosts.NAME] state_dir`, where the process manager's pid files, logs
    and flags go). Each must be bringup's own (`guard/files.check_own_dir`, asked at the CLI's entry): one another
    user can write lets that user plant links there and read the records. A remote host's is checked on that host
    when first used (`transport/remote_dir.py`)."""
    found = [("state_dir", settings.state_path())]
    found += [(f"hosts.{name}.state_dir", Path(host.state_dir).expanduser())
              for name, host in settings.hosts.items() if host.is_local and host.state_dir]
    return found


@dataclass(frozen=True)
class ManagerKind(Generic[D]):
    """One kind of manager: the config variant it is configured by, and how it is built from it."""

    config: type[D]
    build: Callable[[D, Place], Manager]

    def manager(self, dep: DeploymentConfig, at: Place) -> Manager:
        if not isinstance(dep, self.config):
            raise TypeError(f"{type(dep).__name__} is not a {self.config.__name__}")
        return self.build(dep, at)


def _systemd(dep: SystemdDeployment, at: Place) -> Manager:
    from tui.managers.systemd import SystemdManager

    return SystemdManager(at.transport, dep.unit, sudo=at.host.sudo, stop_timeout=dep.stop_timeout_s)


def _process(dep: ProcessDeployment, at: Place) -> Manager:
    from tui.managers.process import ProcessManager

    return ProcessManager(at.transport, at.local_records(), dep.command, dep.env, stop_timeout=dep.stop_timeout_s,
                          log_max_bytes=dep.log_max_mib << 20)


def _none(dep: NoManagerDeployment, at: Place) -> Manager:
    from tui.managers.none import NoManager

    return NoManager()


def _docker(dep: DockerDeployment, at: Place) -> Manager:
    from tui.managers.docker import DockerManager

    return DockerManager(at.transport, dep.container, at.host_records(), engine=dep.engine, image=dep.image,
                         run_args=dep.run_args, command=dep.command, stop_timeout=dep.stop_timeout_s)


def _slurm(dep: SlurmDeployment, at: Place) -> Manager:
    from tui.managers.slurm import SlurmManager

    return SlurmManager(at.transport, at.name, dep, at.host_records(), nvidia_smi=at.host.nvidia_smi)


def _compose(dep: ComposeDeployment, at: Place) -> Manager:
    from tui.managers.compose import ComposeManager

    compose = dep.compose_command or (["podman-compose"] if dep.engine == "podman" else ["docker-compose"])
    return ComposeManager(at.transport, dep.compose_dir, dep.service, at.host_records(), engine=dep.engine,
                          compose=compose, container=dep.container, stop_timeout=dep.stop_timeout_s)


#: every manager kind, by its config variant
KINDS: dict[type[DeploymentConfig], ManagerKind[Any]] = {k.config: k for k in (
    ManagerKind(SystemdDeployment, _systemd),
    ManagerKind(ProcessDeployment, _process),
    ManagerKind(NoManagerDeployment, _none),
    ManagerKind(DockerDeployment, _docker),
    ManagerKind(ComposeDeployment, _compose),
    ManagerKind(SlurmDeployment, _slurm),
)}


def build_manager(dep: DeploymentConfig, at: Place) -> Manager:
    """The manager of a deployment of one node, of the kind its variant is."""
    kind = KINDS.get(type(dep))
    if kind is None:  # a variant added to the config but not here: said, never built as another kind
        raise TypeError(f"no manager is registered for {type(dep).__name__} (managers/registry.py: KINDS)")
    return kind.manager(dep, at)
