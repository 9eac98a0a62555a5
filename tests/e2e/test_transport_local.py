"""The local transport (tui/transport/local.py): timeouts and closed streams leave no process behind, lines are
split on \\r as well as \\n, and a missing program is a TransportError with a clear message."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers.wait import slack
from tui.transport import TransportError, local, process_alive
from tui.transport.local import LocalTransport


def _procs_matching(needle: str) -> list[int]:
    """Live (not zombie) processes whose command line contains `needle`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmd and state != "Z":
            out.append(int(d.name))
    return out


def _pgid_members(pgid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(d.name))
    return out


async def _gone(check, timeout: float = 3.0) -> list[int]:
    deadline = time.monotonic() + slack(timeout)
    left = check()
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        left = check()
    return left


async def _appeared(check, timeout: float = 5.0) -> list[int]:
    """Waits until `check` finds something (a process started), up to `timeout` seconds (stretched by `slack`);
    what it found, or []."""
    deadline = time.monotonic() + slack(timeout)
    found = check()
    while not found and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        found = check()
    return found


@pytest.fixture
def marker() -> str:
    """A unique sleep duration, so the process checks cannot see anyone else's `sleep`."""
    return f"5.{uuid.uuid4().int % 10**6:06d}"


async def test_run_returns_output_and_status() -> None:
    t = LocalTransport()
    r = await t.run(["sh", "-c", "printf 'out'; printf 'err' >&2; exit 3"], timeout=5)
    assert (r.rc, r.text, r.error_text) == (3, "out", "err")
    r = await t.run(["cat"], input=b"piped", timeout=5)
    assert r.stdout == b"piped"
    r = await t.run(["sh", "-c", "printf %s \"$BRINGUP_TEST_VAR\""], env={"BRINGUP_TEST_VAR": "v; $(id)"}, timeout=5)
    assert r.text == "v; $(id)", "argv and env are passed as data, never through a shell"


async def test_run_timeout_kills_the_process(marker: str) -> None:
    t = LocalTransport()
    start = time.monotonic()
    with pytest.raises(TransportError, match="did not finish"):
        await t.run(["sleep", marker], timeout=0.3)
    assert time.monotonic() - start < 2.5
    assert await _gone(lambda: _procs_matching(f"sleep {marker}")) == []


async def test_run_timeout_kills_the_whole_process_group(marker: str) -> None:
    t = LocalTransport()
    with pytest.raises(TransportError):
        await t.run(["bash", "-c", f"sleep {marker} & sleep {marker}; wait"], timeout=0.3)
    assert await _gone(lambda: _procs_matching(f"sleep {marker}")) == []


def _kill_leftovers(needle: str) -> None:
    for pid in _procs_matching(needle):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


async def test_run_timeout_terminates_children_of_a_leader_that_exits_on_sigterm(marker: str) -> None:
    # the leader exits at once on SIGTERM; its background child (own output, so no pipe keeps the run open)
    # must get the signal too: the whole group is signalled, not just the leader
    needle = f"sleep {marker}"
    script = f"trap 'exit 0' TERM; sleep {marker} >/dev/null 2>&1 & wait"
    try:
        with pytest.raises(TransportError):
            await LocalTransport().run(["bash", "-c", script], timeout=0.3)
        assert await _gone(lambda: _procs_matching(needle), timeout=2.0) == []
    finally:
        _kill_leftovers(needle)


async def test_run_timeout_kills_children_that_ignore_sigterm(marker: str) -> None:
    # regression: SIGKILL used to go to the group only if the leader outlived the grace period
    needle = f"sleep {marker}"
    script = f"trap 'exit 0' TERM; (trap '' TERM; exec sleep {marker} >/dev/null 2>&1) & wait"
    try:
        with pytest.raises(TransportError):
            await LocalTransport().run(["bash", "-c", script], timeout=0.3)
        assert await _gone(lambda: _procs_matching(needle), timeout=2.5) == []
    finally:
        _kill_leftovers(needle)


async def test_run_cancelled_kills_the_process(marker: str) -> None:
    t = LocalTransport()
    task = asyncio.create_task(t.run(["sleep", marker], timeout=30))
    assert await _appeared(lambda: _procs_matching(f"sleep {marker}"))
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert await _gone(lambda: _procs_matching(f"sleep {marker}")) == []


async def test_run_missing_binary() -> None:
    with pytest.raises(TransportError) as ei:
        await LocalTransport().run(["bringup-no-such-binary-xyz", "--version"], timeout=5)
    msg = str(ei.value)
    assert "bringup-no-such-binary-xyz" in msg
    assert "No such file" in msg


async def test_stream_missing_binary() -> None:
    gen = LocalTransport().stream(["bringup-no-such-binary-xyz"])
    with pytest.raises(TransportError, match="bringup-no-such-binary-xyz"):
        await gen.__anext__()


async def test_closing_a_stream_kills_its_command() -> None:
    tag = f"bringup-test-{uuid.uuid4().hex}"
    gen = LocalTransport().stream(["bash", "-c", f"while :; do echo x; sleep 0.05; done # {tag}"])
    got = []
    async for line in gen:
        got.append(line)
        if len(got) == 3:
            break
    assert got == ["x", "x", "x"]
    pids = _procs_matching(tag)  # bash (and, for an instant, a forked child about to exec sleep)
    assert pids
    pgid = os.getpgid(min(pids))
    assert pgid != os.getpgid(0), "the command runs in its own process group"
    await gen.aclose()
    assert await _gone(lambda: _procs_matching(tag)) == []
    assert await _gone(lambda: _pgid_members(pgid)) == [], "no child (the loop's sleep) is left either"


async def test_stream_splits_on_carriage_returns() -> None:
    # tqdm on a TTY: progress redraws separated by \r
    script = ("import sys\n"
              "for i in range(3):\n"
              "    sys.stdout.write(f'\\rLoading safetensors checkpoint shards: {i}/2'); sys.stdout.flush()\n"
              "sys.stdout.write('\\r\\ndone\\nno newline at end')\n")
    lines = [x async for x in LocalTransport().stream([sys.executable, "-c", script])]
    assert lines == ["Loading safetensors checkpoint shards: 0/2", "Loading safetensors checkpoint shards: 1/2",
                     "Loading safetensors checkpoint shards: 2/2", "done", "no newline at end"]


async def test_stream_of_a_long_line_and_invalid_utf8() -> None:
    script = "import sys; sys.stdout.buffer.write(b'a' * 200000 + b'\\n\\xff\\xfe ok\\n')"
    lines = [x async for x in LocalTransport().stream([sys.executable, "-c", script])]
    assert lines[-1] == "\ufffd\ufffd ok"
    assert sum(len(x) for x in lines[:-1]) > 0


async def test_write_and_read_file(tmp_path: Path) -> None:
    t = LocalTransport()
    p = tmp_path / "a" / "b" / "50-bringup.conf"
    await t.write_file(str(p), b"[Service]\nExecStart=\n")
    assert await t.read_file(str(p)) == b"[Service]\nExecStart=\n"
    assert await t.read_file(str(tmp_path / "missing")) is None
    assert [x.name for x in p.parent.iterdir()] == ["50-bringup.conf"], "no temp file left behind"


async def test_read_files_reads_each_in_order_and_says_which_are_gone(tmp_path: Path) -> None:
    t = LocalTransport()
    (tmp_path / "a").write_bytes(b"first")
    (tmp_path / "b").write_bytes(b"")
    got = await t.read_files([str(tmp_path / "a"), str(tmp_path / "missing"), f"/proc/{os.getpid()}/stat",
                              str(tmp_path / "b")])
    assert got[0] == b"first" and got[1] is None and got[3] == b""
    assert got[2] is not None and got[2].startswith(f"{os.getpid()} (".encode())
    assert await t.read_files([]) == []
    with pytest.raises(TransportError, match=r"cannot read .*: Is a directory"):  # not a file gone: an error
        await t.read_files([str(tmp_path / "a"), str(tmp_path)])


async def test_a_run_cancelled_twice_has_reaped_its_command_when_it_returns(marker: str) -> None:
    """A caller cancelled again while its command is being reaped (a CLI's exit cancels what is left, a console's
    quit cancels the collectors it already cancelled): the reap still finishes before the cancellation is passed
    on, so the command is gone when the caller's task is, and no reap is left as a task nobody awaits."""
    t = LocalTransport()
    script = f"trap '' TERM; sleep {marker}"  # ignores SIGTERM: the reap has to wait out its grace, then KILL
    task = asyncio.create_task(t.run(["bash", "-c", script], timeout=30))
    assert await _appeared(lambda: _procs_matching(f"sleep {marker}"))
    before = asyncio.all_tasks()
    task.cancel()
    await asyncio.sleep(0.1)  # in its reap now: SIGTERM sent, waiting out the grace
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert _procs_matching(script) == []
    assert asyncio.all_tasks() <= before, "a reap left running on its own"
    _kill_leftovers(f"sleep {marker}")


async def test_a_command_its_reap_could_not_wait_out_stays_known_for_the_closing(
        marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reap that gives up (its bounded wait over, the process not reaped yet) leaves the command in LIVE_GROUPS:
    the CLI's closing waits for those until the loop's child watcher has reaped them. Forgotten at once, as before,
    a transport collected later reaped its child itself and asyncio printed "Unknown child process pid N" on the
    user's terminal (CI, after a `restart` answered no)."""
    monkeypatch.setattr(local, "KILL_WAIT_S", 0.0)
    proc = await asyncio.create_subprocess_exec("bash", "-c", f"trap '' TERM; sleep {marker}",
                                                start_new_session=True)
    local.LIVE_GROUPS[proc.pid] = proc
    await local._reap(proc, 0.0)  # no time to wait at all: SIGTERM ignored, SIGKILL sent, not yet reaped
    assert proc.pid in local.LIVE_GROUPS
    await proc.wait()
    local.LIVE_GROUPS.pop(proc.pid, None)
    # a reap that saw the exit forgets it
    proc = await asyncio.create_subprocess_exec("true")
    local.LIVE_GROUPS[proc.pid] = proc
    await proc.wait()
    await local._reap(proc, 0.0)
    assert proc.pid not in local.LIVE_GROUPS


async def test_a_proc_file_whose_process_exits_while_it_is_read_reads_as_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel answers ESRCH to a read of /proc/PID/stat opened while PID lived and read once it was reaped: a
    `bringup restart` failed on that moment ("cannot read /proc/N/stat: No such process") when the process a lock
    record names exited as it was read. The open and the read are split here so the exit falls between them."""
    child = subprocess.Popen(["sleep", "60"])
    seen: list[BaseException] = []

    class AcrossTheExit:
        """The file opened while the child lives, read once it is reaped."""

        def __init__(self, path: str, mode: str) -> None:
            self.f = open(path, mode)  # noqa: SIM115 -- closed in __exit__
            child.kill()
            child.wait()

        def __enter__(self) -> AcrossTheExit:
            return self

        def __exit__(self, *_: object) -> None:
            self.f.close()

        def read(self) -> bytes:
            try:
                return self.f.read()
            except OSError as e:
                seen.append(e)
                raise

    monkeypatch.setattr(local, "open", AcrossTheExit, raising=False)  # the module's reads, no one else's
    t = LocalTransport()
    assert await t.read_file(f"/proc/{child.pid}/stat") is None
    assert [type(e) for e in seen] == [ProcessLookupError]  # the kernel's answer, not a file that was never there
    monkeypatch.undo()
    assert not await process_alive(t, child.pid)
    assert await process_alive(t, os.getpid())


def test_the_closing_reaps_the_commands_even_when_a_generators_close_runs_out_of_time(marker: str) -> None:
    """The CLI's closing has three stages (cancel what is left, close the async generators, wait for the commands'
    reaping); each runs on its own. A generator whose close never ends (its `finally` waits on something that does
    not come) runs the second stage out of its time: the third must still kill and reap the command left running,
    or asyncio prints "Unknown child process pid N" once the loop is gone and the command outlives bringup."""
    from tui.cli import run_async

    left: list[object] = []

    async def command() -> asyncio.subprocess.Process:
        async def stuck() -> AsyncIterator[int]:
            try:
                yield 1
            finally:
                await asyncio.Event().wait()  # set by no one: only the closing's own timeout ends this close

        gen = stuck()
        await anext(gen)
        left.append(gen)  # still referenced at the exit: closed by the closing's second stage, not collected before
        proc = await asyncio.create_subprocess_exec("bash", "-c", f"trap '' TERM; sleep {marker}",
                                                    start_new_session=True)
        local.LIVE_GROUPS[proc.pid] = proc
        return proc

    proc = run_async(command())
    assert proc.returncode == -signal.SIGKILL  # killed and reaped by the closing, whatever the stage before did
    assert proc.pid not in local.LIVE_GROUPS
    _kill_leftovers(f"sleep {marker}")
