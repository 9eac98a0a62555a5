"""Pilot: while another bringup holds the deployment's lock (its restart, start or stop), `r` and `f` open no dialog:
the console says who holds it (issue 51, item 7: the restart dialog opened, and its yes was refused by the lock
only afterwards). The holder is a real other process that took the lock through the deployment's manager."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.console_app import record_shown_notifications, shown
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import write_config
from tests.helpers.wait import slack
from tui.config.settings import load
from tui.console.control import ControlConsoleApp
from tui.engine import Engine
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen

ROOT = Path(__file__).resolve().parents[2]

#: another bringup at work: the deployment's lock taken for a restart, held until its stdin closes
HOLDER = """
import asyncio, sys
from tui.config.settings import load
from tui.engine import Engine

async def main():
    settings = load(sys.argv[1])
    w = Engine(settings, "sim", settings.deployments["sim"])
    async with w.manager.lock("restart", "+ --disable-cuda-graph"):
        print("held", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
    await w.close()

asyncio.run(main())
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path)


@pytest.fixture
def holder(config: Path) -> Iterator[subprocess.Popen[str]]:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(config)], cwd=ROOT, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    yield p
    assert p.stdin is not None
    p.stdin.close()
    p.wait(slack(10))


@pytest.mark.parametrize("key", ["r", "f"])
async def test_no_dialog_while_another_bringup_holds_the_lock(config: Path, holder: subprocess.Popen[str],
                                                              key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    record_shown_notifications(monkeypatch)
    settings = load(str(config))
    app = ControlConsoleApp(settings, "sim", live=False)
    w = Engine(settings, "sim", settings.deployments["sim"])
    app.engine = w
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press(key)
            said = lambda: [n for n in shown(app) if "holds the lock" in n]  # noqa: E731
            assert await until(pilot, said, timeout=20), shown(app)
            await settled(pilot)
            assert not isinstance(app.screen, ConfirmScreen | FlagsScreen), app.screen
            assert f"(pid {holder.pid}) restart" in said()[0], said()
    finally:
        await w.close()
