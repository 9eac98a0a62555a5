"""The suite's shared fixtures, and how it runs in parallel (pytest-xdist, `--dist loadgroup`).

Most tests wait on real processes (a simulated server loading, a console drawing, an SSH link), so they run in
several workers at once; each keeps to its own tmp dir, port, state dir, tmux socket and environment. The tests of the
one systemd test host share that host's unit, lock and journal, so they form one group that one worker runs in
order, and that group goes first: it is the longest chain of the suite. Modules that share nothing with the rest of
that chain but the host itself run on a host of their own when CI starts one (`BRINGUP_TESTHOST_D_DIR`), as a
second chain beside the first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.ports import free_port
from tests.helpers.processes import kill_processes, sim_processes, wait_no_sim_processes
from tests.helpers.simdeploy import settings_for
from tests.helpers.slurm_cluster import SlurmCluster, held, require_cluster
from tui.config.settings import Settings

# Bytecode is written (into the git-ignored __pycache__ dirs) even where PYTHONDONTWRITEBYTECODE is set, as in some
# shells and CI images (.ci/run unsets it too): otherwise each of the 8 xdist workers rewrites the asserts of every
# test module again, and a `bringup` command the tests start compiles from source the modules that have no .pyc yet
# (`bringup --help`: 0.40 CPU-s against 0.32 compiled). Set here, before xdist starts its workers, which inherit the
# environment. The README's command from a fresh clone took as long with it as without (6:09 and 6:04, 2-core VM):
# the suite's time is elsewhere, but nothing is compiled twice.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

#: the modules whose tests act on the systemd test host (.ci/testhost.sh): its unit, lock, journal and sshd
TESTHOST_MODULES = frozenset({"test_remote.py", "test_remote_lock.py", "test_ssh_faults.py", "test_faults.py",
                              "test_multinode_testhost.py", "test_exec_start_testhost.py", "test_ssh_cost.py"})
#: a test elsewhere that asks for one of these fixtures reaches the test host too
TESTHOST_FIXTURES = frozenset({"testhost", "ssh_config", "conf"})
TESTHOST_GROUP = "testhost"
#: modules whose tests need a test host of their own but nothing the others leave on it (its simulated server's
#: unit, its journal): the fault trials (they reboot the host) and the units of their own (bx-*.service). With a
#: fourth host up they run there, a chain of about 130 s beside the first one's 330 s (of a suite of 4-6 workers
#: of 400-600 s each, the one chain had become as long as a worker's share)
OWN_HOST_MODULES = frozenset({"test_faults.py", "test_exec_start_testhost.py"})
#: that host's state directory (.ci/testhost.sh's TESTHOST_DIR), set by .ci/run; unset, they join the first chain
OWN_HOST_DIR = os.environ.get("BRINGUP_TESTHOST_D_DIR", "")
OWN_HOST_GROUP = "testhost-d"
#: what its `up` recorded in its run/host.env, set for its modules: an `up` after a `down` (a reboot fault) needs them
OWN_HOST_KEYS = ("TESTHOST_NAME", "TESTHOST_SSH_PORT", "TESTHOST_SIM_PORT")
#: the tests of the Slurm test cluster (.ci/slurm.sh, the `slurm_cluster` fixture) share its nodes' GPUs and queue:
#: one group, one worker, in order
SLURM_GROUP = "slurm"


def uses_testhost(item: pytest.Item) -> bool:
    return item.path.name in TESTHOST_MODULES or bool(TESTHOST_FIXTURES & set(getattr(item, "fixturenames", ())))


def uses_slurm(item: pytest.Item) -> bool:
    return "slurm_cluster" in getattr(item, "fixturenames", ())


def on_own_host(module: str) -> bool:
    return bool(OWN_HOST_DIR) and module in OWN_HOST_MODULES


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The test host's tests in one xdist group (two, with the fourth host up), first (a stable sort keeps their
    order within it). Every worker runs this hook on its own collection and gets the same order, as xdist
    requires."""
    for item in items:
        if uses_testhost(item):
            own = on_own_host(item.path.name)
            item.add_marker(pytest.mark.xdist_group(OWN_HOST_GROUP if own else TESTHOST_GROUP))
        elif uses_slurm(item):
            item.add_marker(pytest.mark.xdist_group(SLURM_GROUP))
    items.sort(key=lambda item: (not uses_testhost(item), not uses_slurm(item)))


@pytest.fixture(autouse=True, scope="module")
def testhost_of_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module of OWN_HOST_MODULES, with the fourth host up, reaches that host: every `.ci/testhost.sh` it runs
    (exec, status, ssh-config, up and down) reads TESTHOST_DIR, and the host's name and ports as its `up`
    recorded them (a `down` removes that record, and an `up` without them would boot the first host's defaults); a
    record without them fails the module rather than reach another host.
    Module-scoped and autouse, so it is in place before the module's own module-scoped fixtures (its ssh config)
    and restored after them."""
    if not on_own_host(request.path.name):
        yield
        return
    record = Path(OWN_HOST_DIR, "run", "host.env")
    found = dict(line.partition("=")[::2] for line in (record.read_text().splitlines() if record.is_file() else ())
                 if line.startswith(OWN_HOST_KEYS))
    if set(found) != set(OWN_HOST_KEYS):
        pytest.fail(f"BRINGUP_TESTHOST_D_DIR={OWN_HOST_DIR}, but {record} does not name the host and its ports: "
                    "is it up? (.ci/run boots it)")
    keys = ("TESTHOST_DIR", *OWN_HOST_KEYS)  # the others (boot timeout, cache, ...) apply to every host alike
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(found, TESTHOST_DIR=OWN_HOST_DIR)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The Slurm test cluster (tests/helpers/slurm_cluster.py), idle: skipped without it, failed without it when
    BRINGUP_SLURM=required. Its tests are in one xdist group, so one worker has it, and this session alone while
    it runs (`held`: another pytest session waits); each test leaves it idle again."""
    cluster = require_cluster()
    with held():
        cluster.reset()
        yield cluster


@pytest.fixture
def port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now: no test uses a fixed one."""
    return free_port()


@pytest.fixture(autouse=True)
def own_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's default state dir is its own: bringup writes each run it watches into the deployment's history
    there (tui/engine/history.py), and one test's past runs must not give another an ETA (nor the tester's own
    ~/.local/state any)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture(autouse=True)
def no_leftover_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """For every test with a tmp dir: fails the test if a simulated server (or a supervisor of one, or the
    `nvidia-smi` stand-in) started with that dir on its command line still runs once the test and its other fixtures
    are done; kills them either way, so that one test's leak does not become the next one's failure.

    Autouse fixtures are set up first, so this one is torn down last, after the fixtures that stop deployments."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    tmp: Path = request.getfixturevalue("tmp_path")
    yield
    left = wait_no_sim_processes(str(tmp) + os.sep, timeout=5.0)
    if left:
        kill_processes(left)
        pytest.fail("processes left behind by the test:\n" + "\n".join(f"  {pid}: {cmd[:300]}" for pid, cmd in left))


@pytest.fixture
def make_bringup(tmp_path: Path) -> Iterator[Callable[..., Bringup]]:
    """Simulated `process` deployments in the test's tmp dir (see tests/helpers/e2e.py::Bringup), built from the
    config model; each one made is stopped when the test ends, unless nothing the test started runs any more (a
    test that never started one, or stopped it itself): a `bringup stop` is a whole process of its own, a second of
    CPU on a loaded machine, and no_leftover_processes still checks that nothing was left behind."""
    made: list[Bringup] = []

    def make(**kw: Any) -> Bringup:
        b = Bringup(tmp_path, **kw)
        made.append(b)
        return b

    yield make
    if made and sim_processes(str(tmp_path) + os.sep):
        for b in made:
            b.run("stop", b.name, timeout=60)


@pytest.fixture
def sim_settings(tmp_path: Path) -> Settings:
    """The console tests' simulated deployment `sim` (tests/helpers/simdeploy.py), loaded as bringup loads a config."""
    return settings_for(tmp_path)
