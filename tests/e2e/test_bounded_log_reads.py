"""A run's log read back within a bound, whatever its size (issue 47.4), against a real journald and a real docker
daemon (and podman where it runs).

The systemd manager read a run's whole journal (`journalctl ... -o json` through `communicate()`): a 1.2 GB journal
took `status` to 4.0 GB of RSS and 145 s; `docker logs` was read the same way. Now each reads the run's head and
tail windows (tui/managers/log_window.py) through the one bounded reader (tui/transport/capped.py). Here a run
writes far more than both windows (LOG_MIB, 256 MiB unless BRINGUP_LONG_LOG_MIB says; a few GB is the issue's own
check, too long for CI), and the read must give its first line, its last line and one line saying what was left out
between, holding at its peak (tracemalloc: every allocation of this process, the transport's buffers included) a
bound set by the windows, not by the log: the old whole read holds the log several times over.

journald rate-limits a unit to 10,000 lines per 30 s (scaled by free disk space) unless its unit says otherwise, and
`LogRateLimitIntervalSec=0` in a unit is not passed on to journald by systemd 252 (only a positive interval is): the
writer's unit sets a burst no log reaches instead. Skipped without the test host or a container engine, unless
BRINGUP_TESTHOST / BRINGUP_DOCKER / BRINGUP_PODMAN=required (CI).
"""

from __future__ import annotations

import os
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from tests.helpers.containers import IMAGE, MakeContainer
from tests.helpers.wait import slack, until, until_awaited
from tui.managers.container_state import invocation_of
from tui.managers.log_window import HEAD_BYTES, TAIL_BYTES
from tui.managers.systemd import JOURNAL_HEAD, JOURNAL_TAIL, SystemdManager
from tui.model import LogLine
from tui.transport.ssh import SshTransport

pytestmark = pytest.mark.slow

LOG_MIB = int(os.environ.get("BRINGUP_LONG_LOG_MIB", "256"))
LINE = 4000  # characters of filler per line: under journald's LineMax (48K), a long line as servers print
FIRST = "INFO the first line of the run"
LAST = "RuntimeError: the marker failure at the very end"
#: the most a bounded read may hold at its peak, whatever the log's size: the windows read (the journal's, in
#: records), the lines made of them, and the transports' buffers
PEAK_BOUND = 3 * (JOURNAL_HEAD + JOURNAL_TAIL)

T = TypeVar("T")

def writer(mib: int) -> str:
    """A server that prints its first line, `mib` MiB of numbered lines as fast as it can, its last line, and then
    waits to be killed (its log is read whole by journald before it goes: a sender gone makes journald lose its
    metadata, the invocation among it)."""
    return ("import sys, time\n"
            f"w = sys.stdout.write\nw({FIRST!r} + '\\n')\n"
            f"filler = ' ' + 'y' * {LINE} + '\\n'\n"
            f"for i in range({mib} * 1048576 // ({LINE} + 8)):\n"
            "    w('%07d' % i + filler)\n"
            f"w({LAST!r} + '\\n')\nsys.stdout.flush()\ntime.sleep(3600)\n")


async def peak_of(read: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """What `read` gives, and the most memory this process held in Python allocations while it ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        got = await read()
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def check_windows(lines: list[LogLine], source: str, total: int) -> None:
    """The head (from the run's first line, numbered lines in order), one line saying what was left out and where,
    then the tail (numbered lines in order, up to the run's last line), within the windows."""
    texts = [ln.text for ln in lines]
    assert texts[0] == FIRST, texts[:3]
    assert texts[-1] == LAST, texts[-3:]
    gaps = [i for i, t in enumerate(texts) if t.startswith("bringup: part of this run's output")]
    assert len(gaps) == 1, [t[:80] for t in texts if t.startswith("bringup")]
    assert texts[gaps[0]].endswith(f"the whole log: {source}")
    numbers = [int(t[:7]) for t in texts[1:-1] if t[:7].isdigit()]
    head, tail = numbers[:gaps[0] - 1], numbers[gaps[0] - 1:]
    assert head == list(range(len(head))) and head, "the head is the run's first lines, in order"
    assert tail == list(range(tail[0], total)) and tail, "the tail is the run's last lines, in order"
    assert tail[0] > head[-1] + 1  # something was left out between
    kept = sum(len(t) + 1 for t in texts)  # a journal's windows count records: 4 times the text's (systemd.py)
    assert kept <= 4 * (HEAD_BYTES + TAIL_BYTES) + 2 * LINE, f"{kept} characters kept"


# ---------------------------------------------------------------------------------------------- journald


async def test_a_long_journal_is_read_back_as_its_head_and_tail_within_a_bound(testhost_ssh: SshTransport) -> None:
    unit = f"bringup-longlog-{uuid.uuid4().hex[:12]}.service"
    total = LOG_MIB * 1048576 // (LINE + 8)
    res = await testhost_ssh.run(["systemd-run", f"--unit={unit}", "--quiet", "-p", "LogRateLimitIntervalSec=1s",
                                  "-p", "LogRateLimitBurst=1000000000", "python3", "-c", writer(LOG_MIB)],
                                 timeout=slack(60))
    assert res.rc == 0, res.error_text
    try:
        inv = (await testhost_ssh.run(["systemctl", "show", "-p", "InvocationID", "--value", unit],
                                      timeout=slack(30))).text.strip()
        assert inv

        async def last_line() -> str:
            got = await testhost_ssh.run(["journalctl", f"_SYSTEMD_INVOCATION_ID={inv}", "-n", "1", "-o", "cat",
                                          "--no-pager"], timeout=slack(30))
            return got.text.strip()

        last = ""

        async def journald_has_it_all() -> bool:  # journald has all of the run: then it may end
            nonlocal last
            last = await last_line()
            return last == LAST

        await until_awaited(lambda: f"journald to take the whole run (last: {last[:80]})", journald_has_it_all,
                            timeout=600, every=0.5)
        # it fails, as a server does
        await testhost_ssh.run(["systemctl", "kill", "--signal=SIGKILL", unit], timeout=slack(30))

        mgr = SystemdManager(testhost_ssh, unit)
        t0 = time.monotonic()
        lines, peak = await peak_of(lambda: mgr.read_log(inv))
        took = time.monotonic() - t0
        assert peak < PEAK_BOUND, f"the read held {peak >> 20} MiB at its peak for a {LOG_MIB} MiB journal"
        assert took < 60, f"the read took {took:.0f} s"
        check_windows(lines, mgr.log_source(inv), total)
    finally:
        await testhost_ssh.run(["sh", "-c", f"systemctl kill --signal=SIGKILL {unit}; "
                                f"systemctl reset-failed {unit}"], timeout=slack(30))


async def test_a_short_journal_is_read_back_whole(testhost_ssh: SshTransport) -> None:
    """A run within the head's window is read in one go, whole, with no line saying anything was left out."""
    unit = f"bringup-shortlog-{uuid.uuid4().hex[:12]}.service"
    code = (f"import sys, time; print({FIRST!r}); print('middle'); print({LAST!r}); sys.stdout.flush(); "
            "time.sleep(3600)")
    res = await testhost_ssh.run(["systemd-run", f"--unit={unit}", "--quiet", "python3", "-u", "-c", code],
                                 timeout=slack(60))
    assert res.rc == 0, res.error_text
    try:
        inv = (await testhost_ssh.run(["systemctl", "show", "-p", "InvocationID", "--value", unit],
                                      timeout=slack(30))).text.strip()
        mgr = SystemdManager(testhost_ssh, unit)
        lines: list[LogLine] = []

        async def three_lines() -> bool:
            nonlocal lines
            lines = await mgr.read_log(inv)
            return len(lines) >= 3

        await until_awaited(lambda: f"journald to take the run's 3 lines: {lines}", three_lines, timeout=60,
                            every=0.2)
        assert [ln.text for ln in lines] == [FIRST, "middle", LAST]
        assert all(ln.invocation == inv and ln.cursor for ln in lines)
    finally:
        await testhost_ssh.run(["sh", "-c", f"systemctl kill --signal=SIGKILL {unit}; "
                                f"systemctl reset-failed {unit}"], timeout=slack(30))


# ---------------------------------------------------------------------------------------------- docker, podman


async def test_a_long_container_log_is_read_back_as_its_head_and_tail_within_a_bound(
        make_container: MakeContainer) -> None:
    d = make_container("longlog")
    total = LOG_MIB * 1048576 // (LINE + 8)
    script = writer(LOG_MIB).replace("time.sleep(3600)", "sys.exit(1)")  # the engine's log is written as read
    d.cli("run", "-d", "--name", d.container, IMAGE, "python3", "-c", script)
    until("the container to end", lambda: not d.inspect()["State"]["Running"], timeout=600, every=0.5)
    mgr = d.manager()
    inv = invocation_of(d.inspect())
    lines, peak = await peak_of(lambda: mgr.read_log(inv))
    assert peak < PEAK_BOUND, f"the read held {peak >> 20} MiB at its peak for a {LOG_MIB} MiB log"
    check_windows(lines, mgr.log_source(inv), total)
