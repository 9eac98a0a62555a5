"""The engine's picture of a deployment (its Snapshot) says what the console's panels read of it: the server and its
target, the deployment's GPUs, the memory budget from the flags the unit runs, the GPUs' holders. The console
drawing only that picture: tests/console/test_one_data_path.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import console_states as cs
from tests.helpers.gpu_box import NAME, settings
from tui.engine import Engine
from tui.model import UnitObserved, UnitState


def test_the_picture_says_what_the_panels_read_of_the_deployment(tmp_path: Path) -> None:
    s = settings(tmp_path)
    w = Engine(s, NAME, s.deployments[NAME])
    w.feed(UnitObserved(cs.T0, UnitState(active="active", sub="running", main_pid=4242, invocation="a",
                                         argv=(*cs.ARGV, "--mem-fraction-static", "0.8"))))
    snap = w.snapshot(cs.T0)
    assert (snap.server, snap.target) == ("SGLang", cs.TARGET)
    assert snap.deployment_gpus == (2, 3, 4, 5)
    assert snap.memory_budget == pytest.approx(0.8)  # the flag as the unit runs it, not the preset's default
    assert snap.gpu_holders == ()  # no other deployment on the host
