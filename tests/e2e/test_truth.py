"""Never claim what was not seen: a generation sent before the new run said it was ready is no evidence of it; the
phase is unknown until the unit was read once and again when no news has come for a while; the old run's probe is
no reading of the new run; another bringup's action is named while it happens.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.e2e import Bringup, kill_processes, wait_no_sim_processes
from tests.helpers.wait import slack, until_async
from tui.config.settings import load
from tui.engine import STALE_AFTER_S, Engine, HolderChanged
from tui.model import Phase


async def test_the_phase_is_unknown_until_read_and_again_when_no_news_comes(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path}"\n[hosts.h]\ngpu_source = "none"\n[deployments.d]\nhost = "h"\n'
                   f'manager = "process"\ncommand = ["{sys.executable}", "-c", "pass"]\n'
                   'endpoint = "http://127.0.0.1:9"\n')
    settings = load(str(cfg))
    w = Engine(settings, "d", settings.deployments["d"])
    try:
        snap = w.snapshot(time.time())
        assert snap.phase == Phase.UNKNOWN and snap.stale.startswith("connecting to")  # not STOPPED
        await w.poll_unit()
        now = time.time()
        snap = w.snapshot(now)
        assert snap.phase == Phase.STOPPED and snap.stale == ""
        later = now + STALE_AFTER_S + 7
        snap = w.snapshot(later)
        assert snap.phase == Phase.UNKNOWN and snap.last_phase == Phase.STOPPED
        assert snap.stale == f"no news from {w.host_name} for 12 s (last seen: stopped)"
    finally:
        await w.close()


# ------------------------------------------------------------------------------------------------ other clients


@pytest.fixture
def bu(tmp_path: Path) -> Iterator[Bringup]:
    b = Bringup(tmp_path, time_scale=0.4)
    yield b
    b.run("stop", b.name, timeout=60)
    left = wait_no_sim_processes(str(tmp_path), timeout=5.0)
    if left:
        kill_processes(left)
        pytest.fail(f"processes left behind: {left}")


@pytest.mark.slow
async def test_a_restart_by_another_bringup_is_named_while_it_happens(bu: Bringup) -> None:
    await asyncio.to_thread(bu.bring_up, timeout=90)
    settings = load(str(bu.config))
    w = Engine(settings, bu.name, settings.deployments[bu.name])
    seen: list[Any] = []
    w.subscribe(lambda u: seen.append(u.holder) if isinstance(u, HolderChanged) else None)
    await w.start()
    other = subprocess.Popen(bu.cmd("restart", bu.name, "--set", "disable-cuda-graph", "--yes"), env=bu.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=bu.tmp)
    try:
        await until_async("another holder seen", lambda: w.other_holder is not None, 30)
        note = next(n.text for n in w.snapshot(time.time()).notes if n.text.startswith("another bringup"))
        assert f"(pid {other.pid}) restart {bu.name}" in note and "+ --disable-cuda-graph" in note, note
        # its steps follow, as it records them
        await until_async("the other holder at its follow step",
                          lambda: w.other_holder is not None and w.other_holder.step.startswith("follow"), 60)
        assert "; now: follow: " in next(n.text for n in w.snapshot(time.time()).notes if n.text.startswith("another"))
        await asyncio.to_thread(other.wait, 120)
        assert other.returncode == 0
        await until_async("the other holder gone", lambda: w.other_holder is None, 10)
        assert seen[0] is not None and seen[-1] is None
    finally:
        if other.poll() is None:
            other.kill()
        await w.close()


@pytest.mark.slow
def test_a_process_server_that_dies_at_start_shows_why_and_where_its_log_is(tmp_path: Path) -> None:
    """No fatal signature matched: the excerpt is the end of the run's log (here Python's own error), and the
    words are a process's, not systemd's."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[hosts.h]\ngpu_source = "none"\n[deployments.d]\n'
                   f'host = "h"\nmanager = "process"\ncommand = ["{sys.executable}", "-c", '
                   '"import sglang_is_not_installed_here"]\nendpoint = "http://127.0.0.1:9"\n')
    res = subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), "start", "d", "--json"],
                         capture_output=True, text=True, timeout=slack(120), cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    final = [x for x in res.stdout.splitlines() if x.startswith('{"ok"')][-1]
    failure = json.loads(final)["failure"]
    assert failure is not None, res.stdout + res.stderr
    excerpt = "\n".join(failure["excerpt"]) if isinstance(failure["excerpt"], list) else failure["excerpt"]
    assert "ModuleNotFoundError: No module named 'sglang_is_not_installed_here'" in excerpt, failure
    assert str(tmp_path / "state" / "deployments" / "d" / "logs") in excerpt, failure
    assert "unit" not in excerpt.lower() and "unit" not in failure["hint"].lower(), failure


