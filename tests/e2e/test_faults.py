"""Fault injection on the real systemd test host: each fault once, at a random moment of a restart (the seed is
printed, so a failure can be replayed with BRINGUP_FAULT_SEED), each followed by the invariants of
tests/helpers/fault_harness.py. More trials, with figures: benchmarks/faults.py.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.fault_harness import FAULTS, Harness, sim_port, write_config
from tests.helpers.testhost import host_up, reset_unit, ssh_config_at

pytestmark = pytest.mark.slow


@pytest.fixture
def cfg(tmp_path: Path) -> Iterator[Path]:
    if not host_up():
        pytest.skip("the systemd test host is not up")
    ssh = ssh_config_at(tmp_path / "ssh_config")
    reset_unit()
    yield write_config(tmp_path, ssh, sim_port())
    reset_unit()


# a host reboot last: it takes the longest, and leaves a fresh host behind
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_fault_at_a_random_moment_breaks_no_invariant(cfg: Path, fault: str) -> None:
    seed = int(os.environ.get("BRINGUP_FAULT_SEED") or random.randrange(1 << 30))
    print(f"fault {fault}, seed {seed}")
    async with Harness(cfg, random.Random(seed)) as h:
        trial = await h.run(fault)
    print(trial.as_dict())
    assert trial.violations == [], (seed, trial.as_dict())
    assert trial.converge_s is not None
    if fault == "sshd-stop":
        assert trial.stale_s is not None
