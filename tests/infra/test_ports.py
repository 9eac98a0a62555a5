"""The tests' ports: never in the kernel's ephemeral range, where a port free a moment ago may be an outgoing
connection's by the time a server binds it (CI saw it), and each xdist worker's from a slice of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ports

ROOT = Path(__file__).resolve().parents[2]


def test_ports_are_below_the_ephemeral_range_distinct_and_free() -> None:
    low = ports._ephemeral_low()
    picked = [ports.free_port() for _ in range(50)]
    assert len(set(picked)) == 50
    assert all(ports.LOW <= p < min(ports.HIGH, low) for p in picked), picked
    assert all(ports.bindable(p) for p in picked)


def test_each_worker_picks_from_its_own_slice() -> None:
    code = "from tests.helpers.ports import free_port; print(*(free_port() for _ in range(20)))"
    seen = []
    for worker in ("gw0", "gw1", "gw7"):
        env = {**os.environ, "PYTEST_XDIST_WORKER": worker, "PYTEST_XDIST_WORKER_COUNT": "8"}
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        seen.append({int(p) for p in out})
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
    assert max(seen[0]) < min(seen[1]) and max(seen[1]) < min(seen[2])
