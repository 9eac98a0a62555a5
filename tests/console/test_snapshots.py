"""SVG snapshots of the console at a fixed size, one per panel state (sync tests, fixed data and clock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import console_states as cs
from tests.helpers.console_app import feed
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.model import Phase

SIZE = (100, 30)


@pytest.fixture
def app(tmp_path: Path) -> ControlConsoleApp:
    a = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    a.clock = lambda: cs.T0 + 103.0
    return a


def test_loading(snap_compare: Any, app: ControlConsoleApp) -> None:
    assert snap_compare(app, terminal_size=SIZE, run_before=feed(Phase.LOADING, gib=41.0, util=12))


def test_graph_capture(snap_compare: Any, app: ControlConsoleApp) -> None:
    assert snap_compare(app, terminal_size=SIZE, run_before=feed(Phase.GRAPH_CAPTURE, gib=126.0, util=38))


def test_ready(snap_compare: Any, app: ControlConsoleApp) -> None:
    assert snap_compare(app, terminal_size=SIZE, run_before=feed(Phase.READY, gib=128.4, util=68, tps=True))


def test_failed_dflash_graph_crash(snap_compare: Any, app: ControlConsoleApp) -> None:
    assert snap_compare(app, terminal_size=SIZE,
                        run_before=feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True))


def test_mid_restart(snap_compare: Any, app: ControlConsoleApp) -> None:
    assert snap_compare(app, terminal_size=SIZE,
                        run_before=feed(Phase.STOPPED, gib=96.0, util=0, steps=True, tps=True))


# the layout gives room by priority: at 80x24 the phase, the failure and its whole hint come first, and an empty
# throughput panel or a chart with no room gives way; at 220x60 the panels use the room they have
@pytest.mark.parametrize("size", [(80, 24), (220, 60)], ids=["80x24", "220x60"])
def test_failed_dflash_graph_crash_at(size: tuple[int, int], snap_compare: Any, app: ControlConsoleApp) -> None:
    assert snap_compare(app, terminal_size=size,
                        run_before=feed(Phase.FAILED, gib=127.0, util=0, failure=True, logs=True))


@pytest.mark.parametrize("size", [(80, 24), (220, 60)], ids=["80x24", "220x60"])
def test_ready_at(size: tuple[int, int], snap_compare: Any, app: ControlConsoleApp) -> None:
    assert snap_compare(app, terminal_size=size, run_before=feed(Phase.READY, gib=128.4, util=68, tps=True))
