"""Faults on the SSH link, against the real sshd of the test host (.ci/testhost.sh; see tests/testhost/README.md):
a half-open link (a network blackhole, a hung host) is declared dead within ~10 s and streams end instead of
hanging; a changed host key is refused as a possible man-in-the-middle and an unknown one names the files in use,
both permanent; a refused port is transient; a dropped link leaves no "Task exception was never retrieved".

The link goes through a loopback TCP proxy of each test's own (port 0), which can blackhole it (keep every socket
open, forward nothing) and resume it, so no test touches the test host's sshd and the tests can run in parallel.
Without the test host the tests that need it are skipped, unless BRINGUP_TESTHOST=required (CI), where its absence
fails them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from tests.helpers.e2e import free_port
from tests.helpers.ssh_proxy import Proxy
from tests.helpers.testhost import HostInfo, write_ssh_config
from tests.helpers.wait import until_async, until_awaited
from tui.errors import PermanentError
from tui.transport import TransportError, process_alive
from tui.transport.ssh import KEEPALIVE_COUNT_MAX, KEEPALIVE_INTERVAL_S, SshTransport
from tui.transport.ssh_errors import classify


@pytest.fixture
async def proxied(testhost: HostInfo, tmp_path: Path) -> AsyncIterator[tuple[Proxy, SshTransport]]:
    """A transport to the test host through a proxy of this test's own, with the host's real keys pinned."""
    proxy = await Proxy(testhost.port).start()
    pinned = "".join(ln.replace(f"[127.0.0.1]:{testhost.port}", f"[127.0.0.1]:{proxy.port}") + "\n"
                     for ln in testhost.known_hosts)
    t = SshTransport("th", config=[str(write_ssh_config(tmp_path, proxy.port, testhost.key, pinned))])
    try:
        yield proxy, t
    finally:
        await t.close()
        await proxy.close()


async def failure(t: SshTransport) -> TransportError:
    """The error of a first command on `t`, which must fail to connect (`t` is left as the failure left it)."""
    try:
        await t.run(["true"])
    except TransportError as e:
        return e
    await t.close()
    raise AssertionError("connected")


# ---------------------------------------------------------------------------------------------- dead links


@pytest.mark.slow
async def test_a_blackholed_link_is_declared_dead_within_15_s_then_reconnects(
        proxied: tuple[Proxy, SshTransport]) -> None:
    proxy, t = proxied
    assert (await t.run(["echo", "hi"])).text.strip() == "hi"
    assert t.status == "connected" and t.connected and t.dead_after_s <= 10
    lines: list[str] = []

    async def follow() -> None:
        async for line in t.stream(["sh", "-c", "echo start; exec sleep 600"]):  # then silent, like journalctl -f
            lines.append(line)

    stream = asyncio.create_task(follow())
    command = asyncio.create_task(t.run(["sleep", "600"], timeout=900))
    await until_async("the stream's first line", lambda: lines == ["start"], 10)
    # a silent stream is normal: the keepalive's replies are bytes from the host, and `last_seen` says so
    quiet = time.monotonic()
    await until_async("a keepalive reply on an idle link", lambda: t.last_seen > quiet, KEEPALIVE_INTERVAL_S + 3)
    assert t.status == "connected" and not stream.done()

    proxy.blackhole()
    cut = time.monotonic()
    with pytest.raises(TransportError) as ended:
        await asyncio.wait_for(stream, 15)  # the stream ends, with an error, instead of hanging
    declared = time.monotonic() - cut
    print(f"\nlink declared dead {declared:.1f} s after the blackhole: {ended.value}")
    assert declared <= 15 and not isinstance(ended.value, PermanentError) and "dead" in str(ended.value)
    assert not t.connected and t.status.startswith("disconnected") and "dead" in t.status
    assert t.last_error is not None and t.last_error.kind == "lost"
    assert t.last_seen < cut + 1  # nothing came from the host since
    with pytest.raises(TransportError):  # a command in flight ends too, rather than passing for rc -1
        await asyncio.wait_for(command, 5)

    proxy.resume()
    assert (await t.run(["echo", "back"])).text.strip() == "back"
    assert t.status == "connected" and t.connections == 2 and t.last_seen > cut


async def test_a_proc_file_whose_process_exits_while_it_is_read_reads_as_gone(
        testhost: HostInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sftp-server answers a bare "Failure" to the read of a /proc/PID file whose process exited after the open
    (ESRCH): that is a file gone, not an error to show (it failed `bringup restart` through the local transport).
    The remote process is killed and reaped between the open and the first read."""
    pinned = "".join(ln + "\n" for ln in testhost.known_hosts)
    t = SshTransport("th", config=[str(write_ssh_config(tmp_path, testhost.port, testhost.key, pinned))])
    try:
        pid = int((await t.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 </dev/null & echo $!"])).text.strip())
        assert await process_alive(t, pid)
        real_read = asyncssh.SFTPClientFile.read
        answers: list[str] = []

        async def read_after_the_exit(self: asyncssh.SFTPClientFile, *args: Any, **kwargs: Any) -> Any:
            if not answers:
                await t.run(["kill", "-9", str(pid)])
                async def reaped() -> bool:
                    return (await t.run(["test", "-e", f"/proc/{pid}"])).rc != 0

                await until_awaited(f"pid {pid} gone from /proc after kill -9", reaped, 10)
            try:
                data = await real_read(self, *args, **kwargs)
            except asyncssh.SFTPError as e:
                answers.append(type(e).__name__)
                raise
            answers.append("data")
            return data

        monkeypatch.setattr(asyncssh.SFTPClientFile, "read", read_after_the_exit)
        assert await t.read_file(f"/proc/{pid}/stat") is None
        assert answers == ["SFTPFailure"], answers  # what the host answered: not "no such file"
        monkeypatch.undo()
        assert not await process_alive(t, pid)
    finally:
        await t.close()


async def test_read_files_over_sftp_reads_each_in_order_and_says_which_are_gone(testhost: HostInfo,
                                                                                 tmp_path: Path) -> None:
    pinned = "".join(ln + "\n" for ln in testhost.known_hosts)
    t = SshTransport("th", config=[str(write_ssh_config(tmp_path, testhost.port, testhost.key, pinned))])
    try:
        d = (await t.run(["mktemp", "-d"])).text.strip()
        await t.write_file(f"{d}/a", b"first")
        await t.write_file(f"{d}/b", b"second")
        got = await t.read_files([f"{d}/a", f"{d}/missing", "/proc/1/stat", f"{d}/b"])
        assert got[0] == b"first" and got[1] is None and got[3] == b"second"
        assert got[2] is not None and got[2].startswith(b"1 (")  # a /proc file, whose size says 0, read whole
        await t.run(["rm", "-r", d])
    finally:
        await t.close()


@pytest.mark.slow
async def test_a_read_cut_short_by_a_dead_link_leaves_no_task_exception_behind(
        proxied: tuple[Proxy, SshTransport]) -> None:
    """asyncssh's parallel SFTP reads run in tasks of their own: a read cancelled while the link stalls left them
    behind, to fail once the connection went, with "Task exception was never retrieved"."""
    proxy, t = proxied
    loop = asyncio.get_running_loop()
    created: list[asyncio.Task[Any]] = []
    noise: list[dict[str, Any]] = []
    old_factory, old_handler = loop.get_task_factory(), loop.get_exception_handler()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        created.append(task)
        return task

    loop.set_task_factory(factory)
    loop.set_exception_handler(lambda _loop, ctx: noise.append(ctx))
    try:
        big = (await t.run(["readlink", "-f", "/usr/bin/python3"])).text.strip()

        async def cut_a_read() -> None:  # a function, so that nothing holds the read's traceback afterwards
            start = proxy.to_client
            read = asyncio.create_task(t.read_file(big))
            await until_async("a read under way", lambda: proxy.to_client - start > 256 * 1024 or read.done(), 10)
            assert not read.done(), "the file was read before the link could be cut: pick a bigger one"
            proxy.blackhole()
            # the next request goes into the blackhole: the read now waits for an answer that will never come
            await until_async("a request sent into the blackhole", lambda: proxy.swallowed_from_client > 0, 5)
            read.cancel()
            with contextlib.suppress(asyncio.CancelledError, TransportError):
                await read

        await cut_a_read()
        await until_async("the link declared dead", lambda: not t.connected, 15)
        await t.close()
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0.05)
    finally:
        loop.set_task_factory(old_factory)
        loop.set_exception_handler(old_handler)
    # asyncio logs a task's exception when the task is collected unless someone retrieved it: `_log_traceback`
    left = [task for task in created if task.done() and getattr(task, "_log_traceback", False)]
    assert not left and not noise, ([repr(x) for x in left], [c.get("message") for c in noise])


# ---------------------------------------------------------------------------------------------- host keys


@pytest.mark.slow
async def test_a_changed_host_key_says_changed_and_is_permanent(testhost: HostInfo, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2]
    name = f"[127.0.0.1]:{testhost.port}"
    cfg = write_ssh_config(tmp_path, testhost.port, testhost.key, f"# pinned by hand\n{name} {' '.join(other)}\n",
                           name="testhost")
    t = SshTransport("testhost", config=[str(cfg)])
    err = await failure(t)
    await t.close()
    msg = str(err)
    assert isinstance(err, PermanentError) and err.kind == "host-key-changed", msg
    kh = tmp_path / "known_hosts"
    assert "has CHANGED" in msg and f"{kh}:2" in msg and "man-in-the-middle" in msg, msg
    assert f"ssh-keygen -R '{name}' -f {kh}" in msg, msg
    real = next(ln for ln in testhost.known_hosts if " ssh-ed25519 " in ln).split(None, 1)[1]
    assert asyncssh.import_public_key(real).get_fingerprint() in msg, msg  # the key it offers now, to check
    assert "ssh-keyscan" not in msg and "accept" not in msg.lower(), msg


@pytest.mark.slow
async def test_an_unknown_host_key_is_permanent_and_names_the_files_in_use(testhost: HostInfo,
                                                                         tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2]
    cfg = write_ssh_config(tmp_path, testhost.port, testhost.key, f"otherhost {' '.join(other)}\n",  # not this host
                           name="testhost")
    t = SshTransport("testhost", config=[str(cfg)])
    err = await failure(t)
    status = t.status
    await t.close()
    msg = str(err)
    assert isinstance(err, PermanentError) and err.kind == "host-key-unknown", msg
    assert "unknown SSH host key" in msg and str(tmp_path / "known_hosts") in msg and str(cfg) in msg, msg
    assert f"[127.0.0.1]:{testhost.port}" in msg and "ssh testhost" in msg and "CHANGED" not in msg, msg
    real = next(ln for ln in testhost.known_hosts if " ssh-ed25519 " in ln).split(None, 1)[1]
    assert asyncssh.import_public_key(real).get_fingerprint() in msg, msg  # what `ssh` will ask about
    assert status.startswith("failed:") and t.last_error is err


@pytest.mark.slow
async def test_authentication_refused_is_permanent(testhost: HostInfo, tmp_path: Path) -> None:
    stranger = tmp_path / "id_ed25519"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    cfg = write_ssh_config(tmp_path, testhost.port, str(stranger), "".join(ln + "\n" for ln in testhost.known_hosts),
                           name="testhost")
    t = SshTransport("testhost", config=[str(cfg)])
    err = await failure(t)
    await t.close()
    assert isinstance(err, PermanentError) and err.kind == "auth" and "permission denied" in str(err), err


# ---------------------------------------------------------------------------------------------- transient or not


async def test_a_refused_port_is_not_permanent(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host gpu-box\n    HostName 127.0.0.1\n    Port {free_port()}\n    User root\n")
    t = SshTransport("gpu-box", config=[str(cfg)])
    err = await failure(t)
    await t.close()
    assert not isinstance(err, PermanentError) and err.kind == "refused" and "SSH connection refused" in str(err), err
    assert t.last_error is err


async def test_a_host_name_that_does_not_resolve_is_permanent(tmp_path: Path) -> None:
    name = "no-such-host.invalid"  # RFC 2606: never resolves
    try:
        socket.getaddrinfo(name, 22)
    except socket.gaierror as e:
        if e.errno != socket.EAI_NONAME:
            pytest.skip(f"this machine's resolver answers {e} (not 'no such name')")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host gpu-box\n    HostName {name}\n")
    t = SshTransport("gpu-box", config=[str(cfg)])
    err = await failure(t)
    await t.close()
    assert isinstance(err, PermanentError) and err.kind == "unknown-host", err


def test_which_errors_are_permanent() -> None:
    dead = KEEPALIVE_INTERVAL_S * (KEEPALIVE_COUNT_MAX + 1)
    permanent = [asyncssh.HostKeyNotVerifiable("Host key is not trusted"), asyncssh.PermissionDenied("denied"),
                 socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
                 FileNotFoundError(2, "No such file or directory", "/home/u/.ssh/id_nope"),
                 asyncssh.KeyImportError("Invalid private key")]
    transient = [ConnectionRefusedError(111, "Connection refused"), TimeoutError(),
                 ConnectionResetError(104, "Connection reset by peer"),
                 asyncssh.ConnectionLost("Server not responding to keepalive"), asyncssh.ConnectionLost("x"),
                 socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
                 OSError(113, "No route to host"), asyncssh.ChannelOpenError(2, "open failed")]
    assert all(isinstance(classify("h", e), PermanentError) for e in permanent)
    assert not any(isinstance(classify("h", e, dead_after_s=dead), PermanentError) for e in transient)
    assert "no reply from the host for 9 s" in str(classify("h", transient[3], dead_after_s=dead))
    assert dead <= 10
