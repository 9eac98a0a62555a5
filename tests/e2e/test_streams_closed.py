"""A stream closed is a command reaped, at once, through every layer that reads it: an engine's collectors read
the transport's lines through generators of their own (nvidia-smi's samples, a manager's log), and a generator
left suspended inside another is only closed later by the garbage collector, as a task of its own that nothing
awaits. Its command then outlives the engine's close, and, when the loop ends first, asyncio prints about it on
the user's terminal ("Task was destroyed but it is pending", "Unknown child process pid N")."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.preloaded import Preloaded
from tests.helpers.simdeploy import sim_host
from tests.helpers.wait import until_async
from tui.collectors.gpu_smi import SmiSource
from tui.config.settings import load
from tui.engine import Engine
from tui.transport.local import LocalTransport


def _our_children() -> list[tuple[int, str]]:
    """This process's live (not zombie) children, with their command lines: what it started and has not reaped (the
    fork server the tests start commands from is the tests' own, not a child of the code under test)."""
    me, out, ours = os.getpid(), [], Preloaded.pid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z" and int(d.name) != ours:
            out.append((int(d.name), cmd))
    return out


async def test_closing_the_gpu_samples_reaps_nvidia_smi_at_once(tmp_path: Path) -> None:
    """Closed while it waits for its consumer (suspended at a sample it yielded, inside the lines it reads), the
    samples' generator closes the `nvidia-smi -lms` stream under it before its own close returns."""
    host = sim_host(tmp_path / "simgpu")
    src = SmiSource(LocalTransport(), host.nvidia_smi, interval_ms=100)
    samples = src.stream()
    first = await asyncio.wait_for(anext(samples), 30)
    assert first.gpus and not first.error, first
    assert any("nvidia_smi" in cmd for _, cmd in _our_children()), "the stream's command runs while it is read"
    await samples.aclose()
    assert _our_children() == []  # now, not after a poll: nothing was left for the collector of garbage


@pytest.mark.slow
async def test_an_engine_closed_has_reaped_every_command_it_started(tmp_path: Path) -> None:
    """The console's quit and the CLI's exit close the engine, then end the loop: by then every command its
    collectors started (the log's `tail -F`, nvidia-smi's stream, the unit's reads) is reaped."""
    bu = Bringup(tmp_path)
    bu.bring_up()
    try:
        settings = load(str(bu.config))
        w = Engine(settings, bu.name, settings.deployments[bu.name])
        await w.start()
        try:
            await until_async("the run's log followed and the GPUs sampled", lambda: bool(w.log.followed)
                              and w.gpus is not None and bool(w.gpus.gpus), timeout=60)
            assert _our_children(), "the engine's collectors run commands while it watches"
        finally:
            await w.close()
        assert _our_children() == []
    finally:
        bu.run("stop", bu.name, timeout=60)


async def test_closing_a_journal_follow_reaps_journalctl_at_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through a manager's log: the systemd manager's follow, closed at a line it yielded, ends its
    `journalctl -f` before its close returns. `journalctl` here is a stand-in on PATH printing a record a tenth of a
    second (the real one, over SSH on the systemd test host, is followed by tests/e2e/test_remote.py)."""
    from tui.managers.systemd import SystemdManager
    from tui.model import UnitState

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "journalctl"
    stand_in.write_text('#!/bin/sh\nn=0\nwhile :; do n=$((n+1)); echo \'{"__CURSOR":"c\'$n\'","MESSAGE":"line \'$n\'",'
                        '"__REALTIME_TIMESTAMP":"1700000000000000","_SYSTEMD_INVOCATION_ID":"abc"}\'; '
                        'sleep 0.1; done\n')
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    unit = UnitState("active", invocation="abc", started_at=1.0)
    lines = SystemdManager(LocalTransport(), "sim.service").follow(unit)
    first = await asyncio.wait_for(anext(lines), 30)
    assert first.text == "line 1", first
    assert any("journalctl" in cmd for _, cmd in _our_children())
    await lines.aclose()
    assert _our_children() == []
