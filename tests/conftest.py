"""The suite's shared fixtures, and how it runs in parallel (pytest-xdist, `--dist loadgroup`).

Most tests wait on real processes (a simulated server loading, a console drawing, an SSH link), so they run in
several workers at once; each keeps to its own tmp dir, port, state dir, tmux socket and environment. The tests of the
one systemd test host share that host's unit, lock and journal, so they form one group that one worker runs in
order, and that group goes first: it is the longest chain of the suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.ports import free_port
from tests.helpers.processes import kill_processes, sim_processes, wait_no_sim_processes
from tests.helpers.simdeploy import settings_for
from tui.config import Settings

#: the modules whose tests act on the systemd test host (.ci/testhost.sh): its unit, lock, journal and sshd
TESTHOST_MODULES = frozenset({"test_remote.py", "test_remote_lock.py", "test_ssh_faults.py", "test_faults.py",
                              "test_multinode_testhost.py"})
#: a test elsewhere that asks for one of these fixtures reaches the test host too
TESTHOST_FIXTURES = frozenset({"testhost", "ssh_config", "conf"})
TESTHOST_GROUP = "testhost"


def uses_testhost(item: pytest.Item) -> bool:
    return item.path.name in TESTHOST_MODULES or bool(TESTHOST_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The test host's tests in one xdist group, first (a stable sort keeps their order within it). Every worker
    runs this hook on its own collection and gets the same order, as xdist requires."""
    for item in items:
        if uses_testhost(item):
            item.add_marker(pytest.mark.xdist_group(TESTHOST_GROUP))
    items.sort(key=lambda item: not uses_testhost(item))


# ------------------------------------------------------------------------------------------------- fixtures


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
