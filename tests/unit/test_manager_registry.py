"""Manager kinds are chosen through one registry, capabilities are declared, and permanence is a type.

The deployment config is a union discriminated on `manager` (tui/config/deployments.py); each variant builds its manager
through managers/registry.py. What a manager or a transport can do beyond the protocol is a declared protocol
(`LogHistory`, `Link`, `Forwarding`) asked with isinstance; an error that waiting will not fix derives from
`tui.errors.PermanentError`; what a manager tells during a step reaches the caller through the `report` argument.
"""

from __future__ import annotations

import asyncio
import typing
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from tui.cli.fleet import _read_error_code
from tui.config.deployments import MANAGERS, Deployment, DeploymentConfig, parse_deployment
from tui.config.parts import ConfigError, HostConfig
from tui.config.settings import Settings, load
from tui.errors import PermanentError
from tui.exit_codes import ExitCode
from tui.managers import LockHeld, LogHistory, Manager, ManagerError, PermanentManagerError, Report, unreported
from tui.managers.compose import ComposeManager
from tui.managers.docker import DockerManager
from tui.managers.multinode import MultiNodeManager, Node, _named
from tui.managers.none import NoManager
from tui.managers.process import ProcessManager
from tui.managers.registry import KINDS, Place, build_manager
from tui.managers.slurm import SlurmManager
from tui.managers.systemd import SystemdManager
from tui.model import LogLine, Step, UnitState
from tui.ops.restart import _reporting
from tui.transport import Forwarding, Link, PermanentTransportError, TransportError, link_status
from tui.transport.local import LocalTransport
from tui.transport.ssh import SshTransport
from tui.transport.ssh_errors import classify

#: the smallest valid table of each manager kind, and the manager class it builds
TABLES: dict[str, tuple[dict[str, Any], type]] = {
    "systemd": ({"unit": "sglang.service"}, SystemdManager),
    "process": ({"command": ["python3", "-m", "sglang.launch_server"]}, ProcessManager),
    "none": ({}, NoManager),
    "docker": ({"container": "sglang"}, DockerManager),
    "compose": ({"compose_dir": "/srv/llm", "service": "sglang"}, ComposeManager),
    "slurm": ({"command": ["python3", "-m", "sglang.launch_server"], "output_dir": "/shared/bringup"}, SlurmManager),
}


def _manager_names() -> set[str]:
    """The names the union's variants declare in their `manager` Literal."""
    union = typing.get_args(Deployment)[0]
    names: set[str] = set()
    for member in typing.get_args(union):
        variant = typing.get_args(member)[0]
        ann = variant.model_fields["manager"].annotation
        assert typing.get_origin(ann) is Literal, variant
        names.update(typing.get_args(ann))
    return names


def test_every_manager_name_has_one_variant_and_one_registry_entry() -> None:
    assert _manager_names() == set(MANAGERS) == set(TABLES)
    for name, variant in MANAGERS.items():
        assert variant.model_fields["manager"].default == name, variant
    assert set(KINDS) == set(MANAGERS.values())


@pytest.mark.parametrize("name", list(TABLES))
def test_every_variant_builds_its_own_manager(name: str, tmp_path: Path) -> None:
    table, cls = TABLES[name]
    dep = parse_deployment({"manager": name, **table})
    assert type(dep) is MANAGERS[name] and dep.manager == name
    mgr = build_manager(dep, Place(Settings(state_dir=str(tmp_path)), "d", HostConfig(), LocalTransport()))
    assert type(mgr) is cls
    assert mgr.can_control == (name != "none") and mgr.sees_run == (name != "none")
    assert isinstance(mgr, LogHistory) == (name != "none")


def test_a_variant_without_an_entry_is_said_never_built_as_another_kind(tmp_path: Path) -> None:
    class Kubernetes(DeploymentConfig):
        manager: Literal["kubernetes"] = "kubernetes"

    with pytest.raises(TypeError, match="no manager is registered for Kubernetes"):
        build_manager(Kubernetes(), Place(Settings(state_dir=str(tmp_path)), "d", HostConfig(), LocalTransport()))


def test_an_unknown_manager_is_one_config_line_naming_the_known_ones(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[deployments.k]\nmanager = "kubernetes"\nendpoint = "http://127.0.0.1:9"\n')
    with pytest.raises(ConfigError) as e:
        load(str(cfg))
    assert str(e.value) == (f"{cfg.resolve()}: deployments.k.manager: Input should be 'systemd', 'process', 'none', "
                            "'docker', 'compose' or 'slurm'")


def test_a_key_of_another_manager_names_the_managers_it_is_for(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[deployments.k]\nmanager = "systemd"\nunit = "u.service"\nservice = "x"\n')
    with pytest.raises(ConfigError) as e:
        load(str(cfg))
    assert str(e.value) == f"{cfg.resolve()}: deployments.k: service is for manager = 'compose', not 'systemd'"


def test_a_left_out_manager_is_process_and_is_written_out() -> None:
    dep = parse_deployment({"command": ["server"]})
    assert dep.manager == "process" and "manager" in dep.model_dump(exclude_unset=True)


def test_nodes_of_each_variant_take_their_own_keys() -> None:
    sd = parse_deployment({"manager": "systemd", "unit": "a.service", "nodes": [{"host": "a"},
                                                                                 {"host": "b", "unit": "b.service"}]})
    assert [(n.host, n.what_runs) for n in (sd.node(0), sd.node(1))] == [("a", "a.service"), ("b", "b.service")]
    pr = parse_deployment({"manager": "process", "env": {"A": "1"}, "nodes": [
        {"host": "a", "command": ["head"]}, {"host": "b", "command": ["worker"], "env": {"B": "2"}}]})
    one = pr.node(1)
    assert (one.host, one.what_runs, one.nodes) == ("b", "worker", [])
    assert one.model_dump()["env"] == {"A": "1", "B": "2"}


# ------------------------------------------------------------------------------------------- permanent errors


def test_permanent_errors_are_one_type() -> None:
    assert issubclass(PermanentTransportError, TransportError) and issubclass(PermanentTransportError, PermanentError)
    assert issubclass(PermanentManagerError, ManagerError) and issubclass(PermanentManagerError, PermanentError)
    for transient in (TransportError("refused", kind="refused"), ManagerError("busy"), LockHeld("held")):
        assert not isinstance(transient, PermanentError)
        assert _read_error_code(transient) == ExitCode.FAILED
    for permanent in (PermanentTransportError("host key changed", kind="host-key-changed"),
                      PermanentManagerError("unit x not found")):
        assert _read_error_code(permanent) == ExitCode.USAGE


def test_a_node_named_error_keeps_its_permanence() -> None:
    for e in (PermanentTransportError("auth", kind="auth"), PermanentManagerError("no unit"), TransportError("reset"),
              ManagerError("busy")):
        named = _named("gpu-b", e)
        assert str(named).startswith("gpu-b: ") or str(named).startswith("node gpu-b: ")
        assert isinstance(named, PermanentError) == isinstance(e, PermanentError), e
        assert type(named) is type(e)


def test_classify_marks_what_waiting_will_not_fix() -> None:
    assert isinstance(classify("h", FileNotFoundError(2, "No such file", "/k")), PermanentError)
    assert not isinstance(classify("h", ConnectionRefusedError()), PermanentError)


# --------------------------------------------------------------------------------------- transport capabilities


def test_only_a_link_has_a_status_and_forwards() -> None:
    local = LocalTransport()
    assert not isinstance(local, Link) and not isinstance(local, Forwarding) and link_status(local) == "connected"
    ssh = SshTransport("gpu-box")
    assert isinstance(ssh, Link) and isinstance(ssh, Forwarding)
    assert link_status(ssh) == "not connected"


# ----------------------------------------------------------------------------------------------------- reports


class _Quiet:
    """A node's manager that does what it is asked at once and tells nothing of its own."""

    kind = "fake"
    target = "a fake"
    can_control = True
    sees_run = True

    def __init__(self) -> None:
        self.started: list[list[str]] = []

    async def state(self) -> UnitState:
        return UnitState(active="inactive")

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        self.started.append(list(argv))

    async def stop(self, report: Report = unreported) -> None:
        return None

    async def follow(self, unit: UnitState) -> AsyncIterator[LogLine]:
        return
        yield

    async def read_argv(self) -> list[str]:
        return ["worker"]

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None:
        return None

    async def read_saved_argv(self, which: str) -> list[str] | None:
        return None

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        return None

    def lock(self, purpose: str, change: str = "") -> Any:
        raise NotImplementedError

    async def pids(self, unit: UnitState) -> set[int] | None:
        return None


def test_a_manager_reports_to_the_caller_of_the_step_only() -> None:
    nodes: list[Manager] = [_Quiet(), _Quiet()]
    mgr = MultiNodeManager([Node("gpu-a", nodes[0]), Node("gpu-b", nodes[1])], ())
    told: list[tuple[str, str]] = []
    asyncio.run(mgr.stop(lambda step, detail: told.append((step, detail))))
    assert {d for _, d in told} >= {"gpu-a: stopping", "gpu-b: stopping"}
    assert all(s == "stop" for s, _ in told) and sum("stopped in" in d for _, d in told) == 2
    told.clear()
    asyncio.run(mgr.start(["head"]))  # no one listening: nothing told, nowhere kept for the next caller
    asyncio.run(mgr.start(["head"], lambda step, detail: told.append((step, detail))))
    assert told == [("start", "gpu-a: starting (head)"), ("start", "gpu-a: start asked"),
                    ("start", "gpu-b: starting"), ("start", "gpu-b: start asked")]


def test_a_report_is_a_running_line_of_its_step() -> None:
    steps: list[Step] = []
    _reporting(steps.append)("start", "pulling image x")
    assert [(s.name, s.status, s.detail) for s in steps] == [("start", "running", "pulling image x")]
