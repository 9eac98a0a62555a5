"""A `process` run's log is bounded twice (issue 29.6): on disk, by the supervisor's cap (`log_max_mib`: the run's
first part kept, one previous part, the live file), and when read back, by its first and last bytes only (a 1.6 GB
log read whole took `bringup status` 216 s at 7.4 GB RSS). Real supervisor, real servers printing as fast as they
can, the real CLI in a subprocess whose peak RSS is measured."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.wait import slack
from tui.config.deployments import ProcessDeployment
from tui.config.parts import HostConfig
from tui.managers.process import HEAD_BYTES, TAIL_BYTES, LogFile, ProcessManager, plan_read
from tui.transport.local import LocalTransport

#: prints a first line, then `n` blocks of 4000 lines of 150 bytes as fast as it can, then a traceback; exits 3
SERVER = """\
import sys
print("INFO the first line of the run", flush=True)
block = (("y" * 150) + "\\n").encode() * 4000
for i in range(int(sys.argv[1])):
    sys.stdout.buffer.write(block)
sys.stdout.flush()
print("Traceback (most recent call last):", flush=True)
print('  File "server.py", line 9, in <module>', flush=True)
print("RuntimeError: the marker failure at the very end", flush=True)
sys.exit(3)
"""
BLOCK = 151 * 4000


def server(tmp: Path, mib: int) -> list[str]:
    script = tmp / "server.py"
    script.write_text(SERVER)
    return [sys.executable, str(script), str(mib * (1 << 20) // BLOCK + 1)]


def test_the_read_plan_is_the_head_and_the_tail_whatever_the_size() -> None:
    small = [LogFile("a", 100)]
    assert plan_read(small) == ([plan_read(small)[0][0]], 0)
    big = [LogFile("h", 50 << 20), LogFile("p", 50 << 20), LogFile("l", 1 << 20)]
    pieces, skipped = plan_read(big)
    assert [(p.path, p.start, p.count) for p in pieces] == [
        ("h", 0, HEAD_BYTES), ("p", (50 << 20) - (TAIL_BYTES - (1 << 20)), TAIL_BYTES - (1 << 20)), ("l", 0, 1 << 20)]
    assert sum(p.count for p in pieces) == HEAD_BYTES + TAIL_BYTES and skipped == (101 << 20) - HEAD_BYTES - TAIL_BYTES
    one = [LogFile("l", 1 << 30)]
    pieces, skipped = plan_read(one)
    assert [(p.start, p.count) for p in pieces] == [(0, HEAD_BYTES), ((1 << 30) - TAIL_BYTES, TAIL_BYTES)]


def on_disk(logs: Path) -> int:
    total = 0
    for p in logs.iterdir() if logs.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):  # rotated away between the listing and the stat
            total += p.stat().st_size
    return total


async def test_a_server_printing_fast_stays_under_the_cap_and_keeps_its_first_and_last_lines(tmp_path: Path) -> None:
    cap = 3 << 20
    cmd = server(tmp_path, 40)  # 40 MiB of output, 13 times the cap
    mgr = ProcessManager(LocalTransport(), str(tmp_path / "run"), cmd, {}, log_max_bytes=cap)
    await mgr.start(cmd)
    logs = tmp_path / "run" / "logs"
    peak = 0
    while (await mgr.state()).running:
        peak = max(peak, on_disk(logs))
        await asyncio.sleep(0.01)
    unit = await mgr.state()
    peak = max(peak, on_disk(logs))
    assert unit.exit_status == 3, unit
    assert peak <= cap + 4096, f"{peak} bytes on disk, cap {cap}"
    base = logs / f"{unit.invocation}.log"
    assert base.with_name(base.name + ".head").read_text().split("\n", 1)[0].endswith("INFO the first line of the run")
    assert base.read_text().rstrip("\n").endswith("RuntimeError: the marker failure at the very end")
    lines = [ln.text for ln in await mgr.read_log(unit.invocation)]
    assert lines[0] == "INFO the first line of the run"
    assert lines[-1] == "RuntimeError: the marker failure at the very end"
    assert any(t.startswith("bringup: log continues here") and "dropped by the log cap" in t for t in lines), lines


def test_status_of_a_run_with_a_large_log_is_bounded_in_memory_and_names_the_failure_at_its_end(
        tmp_path: Path) -> None:
    """100 MiB of log: read whole it took `status` ~450 MiB of RSS on this VM (216 s and 7.4 GB for 1.6 GB); read
    bounded, the same as a short log's (~70 MiB)."""
    state = tmp_path / "state"
    cmd = server(tmp_path, 100)
    cfg = ConfigFile(state_dir=state, hosts={"h": HostConfig(gpu_source="none")},
                     deployments={"d": ProcessDeployment(host="h", manager="process", command=cmd, log_max_mib=1024,
                                                         endpoint=f"http://127.0.0.1:{free_port()}")}
                     ).write(tmp_path / "bringup.toml")

    async def run_it() -> None:
        mgr = ProcessManager(LocalTransport(), str(state / "deployments" / "d"), cmd, {}, log_max_bytes=1 << 30)
        await mgr.start(cmd)
        while (await mgr.state()).running:
            await asyncio.sleep(0.05)

    asyncio.run(run_it())
    size = on_disk(state / "deployments" / "d" / "logs")
    assert size > 100 << 20
    measure = ("import resource, subprocess, sys\n"
               "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stdout.write(r.stdout)\n"
               "print('maxrss_kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    r = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "tui", "--config", str(cfg),
                        "status", "d"], capture_output=True, text=True, timeout=slack(120), env=env,
                       cwd=Path(__file__).resolve().parents[2])
    out, _, rss = r.stdout.rpartition("maxrss_kib ")
    rss_mib = int(rss) / 1024
    assert "FAILED" in out and "RuntimeError: the marker failure at the very end" in out, out + r.stderr
    assert rss_mib < 160, f"status peaked at {rss_mib:.0f} MiB for a {size >> 20} MiB log"
