"""The fixtures the e2e modules share: the systemd test host (tests/helpers/testhost.py) and the container engines
(tests/helpers/containers.py). A test that asks for `testhost`, `ssh_config` or `conf` joins the test host's xdist
group (tests/conftest.py), so that the tests acting on its one unit, lock and journal run in order."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.containers import ENGINES, IMAGE, Deployment, cli, need_engine
from tests.helpers.simdeploy import ALL_GPUS, hosts_on_testhost, sim_port_on_testhost, systemd_deployment
from tests.helpers.testhost import (
    HostInfo,
    host_info,
    install_bx_units,
    remove_bx_units,
    reset_unit,
    ssh_config_at,
    texec,
    write_ssh_config,
)
from tui.config.parts import FlagConfig
from tui.config.settings import ProbeConfig
from tui.transport.ssh import SshTransport

# ------------------------------------------------------------------------------------------ the test host


@pytest.fixture(scope="module")
def testhost() -> HostInfo:
    """The host's sshd port, root's key and the host's keys, read without writing anything (skipped, or failed
    with BRINGUP_TESTHOST=required, when the host is not up)."""
    return host_info()


@pytest.fixture(scope="module")
def ssh_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`.ci/testhost.sh ssh-config` of the module's own: the hosts `testhost` (root) and `testhost-tester`."""
    return ssh_config_at(tmp_path_factory.mktemp("ssh") / "config")


@pytest.fixture
def conf(tmp_path: Path, ssh_config: Path) -> Iterator[Path]:
    """A config of three systemd deployments of the host's simulated server (as root, as `tester` with sudo and
    without), the unit reset before and after; the test fails if bringup left a command running on the host."""
    reset_unit()
    scenario = FlagConfig(name="scenario", kind="choice", choices=["dflash-graph-crash", "oom-on-fast-restart",
                                                                   "stale-health", "hang-loading",
                                                                   "crash-while-serving"])
    port = sim_port_on_testhost()
    cfg = ConfigFile(
        state_dir=tmp_path / "state", probe=ProbeConfig(interval_s=0.3),
        hosts=hosts_on_testhost(ssh_config, tester=True),
        deployments={
            "as-tester": systemd_deployment(port, "tester", gpus=ALL_GPUS, release_tolerance_mib=512),
            "no-sudo": systemd_deployment(port, "tester-nosudo"),
            "remote": systemd_deployment(port, gpus=ALL_GPUS, release_tolerance_mib=512, release_timeout_s=120,
                                         extra_flags=[scenario]),
        }).write(tmp_path / "bringup.toml")
    yield cfg
    reset_unit()
    left = texec("sh", "-c", "ps -eo pid,args | grep -E 'journalctl|nvidia_smi|nvidia-smi|sleep 2147483647|flock' "
                 "| grep -v grep || true")
    assert left.strip() == "", f"bringup left commands running on the host:\n{left}"


@pytest.fixture
async def testhost_ssh(testhost: HostInfo, tmp_path: Path) -> AsyncIterator[SshTransport]:
    """A link of the test's own to the host as root, trusting the host's own keys only."""
    cfg = write_ssh_config(tmp_path, testhost.port, testhost.key,
                           "".join(ln + "\n" for ln in testhost.known_hosts), name="testhost")
    t = SshTransport("testhost", config=[str(cfg)])
    yield t
    await t.close()


@pytest.fixture
def bx_units() -> Iterator[None]:
    """The tests' own units (`bx-*.service`, tests/helpers/testhost.py) installed, and removed after."""
    install_bx_units()
    yield
    remove_bx_units()


# ------------------------------------------------------------------------------------ the container engines


@pytest.fixture(scope="session", params=ENGINES)
def daemon(request: pytest.FixtureRequest) -> str:
    """The engine whose CLI the test drives, once it answers and holds the simulated server's image."""
    engine = str(request.param)
    if shutil.which(engine) is None:
        need_engine(engine, f"no {engine} CLI")
    if cli(engine, "info", "--format", "{{.Host.Arch}}" if engine == "podman" else "{{.ServerVersion}}",
           check=False, timeout=20).returncode != 0:
        need_engine(engine, "no Docker daemon answers at DOCKER_HOST" if engine == "docker" else
                    "podman does not run here (CONTAINERS_CONF: .ci/containers.sh env)")
    if cli(engine, "image", "inspect", IMAGE, check=False).returncode != 0:
        need_engine(engine, f"the simulated server's image {IMAGE} is not in {engine}'s store")
    return engine


@pytest.fixture
def make_container(daemon: str, tmp_path: Path) -> Iterator[Callable[[str], Deployment]]:
    """Container deployments in the test's tmp dir on `daemon`'s engine; their containers removed at the end."""
    made: list[Deployment] = []

    def new(name: str) -> Deployment:
        d = Deployment(tmp_path / name, name, daemon)
        made.append(d)
        return d

    yield new
    for d in made:
        names = d.cli("ps", "-aq", "--filter", f"name={d.container}", check=False).stdout.split()
        if names:
            d.cli("rm", "-f", *names, check=False)
