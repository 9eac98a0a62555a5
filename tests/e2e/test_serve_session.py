"""`bringup serve`'s sessions against a stand-in console: the real server (`make_server`, aiohttp on a free loopback
port), a real websocket client, and a real child process that speaks Textual's web-driver protocol. The stand-in says
what it was given (its size, each message) and can refuse to die, which a real console does only sometimes (issue
28.4: a console spinning after its browser was killed ignored SIGTERM): so the escalation to SIGKILL, the size clamps
and the session cap are tested without waiting for luck.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.helpers.browser import live_in_group
from tests.helpers.ports import free_port
from tests.helpers.wait import slack, until_async
from tui.cli import serve_session
from tui.cli.serve import Gate, make_server

#: a console in Textual's web-driver protocol: says its size and pid (and, stubborn, its child's), echoes each meta
#: packet it is sent as data, quits on "quit" unless stubborn; stubborn, it and its child ignore SIGTERM and spin
STUB = r'''
import json, os, signal, subprocess, sys
stubborn = sys.argv[1] == "stubborn"
out = sys.stdout.buffer
def send(kind, payload):
    out.write(kind + len(payload).to_bytes(4, "big") + payload); out.flush()
child = None
if stubborn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c",
        "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass"])
out.write(b"__GANGLION__\n")
send(b"D", json.dumps({"cols": os.environ["COLUMNS"], "rows": os.environ["ROWS"], "pid": os.getpid(),
                       "child": child.pid if child else None}).encode())
inp = sys.stdin.buffer
while True:
    head = inp.read(5)
    if len(head) < 5:
        break
    payload = inp.read(int.from_bytes(head[1:], "big"))
    if head[:1] == b"M":
        send(b"D", payload)
        if json.loads(payload)["type"] == "quit" and not stubborn:
            send(b"M", b'{"type": "exit"}')
            break
if stubborn:
    while True:
        pass
'''


class Served:
    def __init__(self, url: str, server: object, runner: web.AppRunner) -> None:
        self.url, self.server, self.runner = url, server, runner

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start(tmp: Path, mode: str = "plain", max_sessions: int = 4) -> Served:
    stub = tmp / "stub_console.py"
    stub.write_text(STUB)
    port = free_port()
    server = make_server([sys.executable, str(stub), mode], "stub", Gate(None, port, True), max_sessions)
    runner = web.AppRunner(await server._make_app(), handle_signals=False, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return Served(f"http://127.0.0.1:{port}/", server, runner)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def next_data(ws: aiohttp.ClientWebSocketResponse) -> dict[str, object]:
    msg = await asyncio.wait_for(ws.receive(), 30)
    assert msg.type == aiohttp.WSMsgType.BINARY, msg
    return dict(json.loads(msg.data))


def gone(pid: int) -> bool:
    """No such process, or only its zombie (reaped by its parent later)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


async def test_the_size_in_the_query_is_clamped(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    served = await start(tmp_path)
    try:
        for query, size in (("width=20000&height=10000", ("500", "200")), ("width=0&height=-5", ("1", "1")),
                            ("width=wide&height=9" + "9" * 5000, ("80", "24")), ("width=120&height=40", ("120", "40"))):
            async with http.ws_connect(served.url + "ws?" + query) as ws:
                hello = await next_data(ws)
                assert (hello["cols"], hello["rows"]) == size, (query, hello)
    finally:
        await served.stop()


async def test_every_resize_is_clamped_and_junk_is_dropped(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    served = await start(tmp_path)
    try:
        async with http.ws_connect(served.url + "ws?width=80&height=24") as ws:
            await next_data(ws)
            for junk in ("not json", "[]", '["resize", {"width": "x", "height": 3}]', '["resize", [1, 2]]',
                         '["resize", {"width": true, "height": 3}]', '{"resize": 1}'):
                await ws.send_str(junk)
            await ws.send_str(json.dumps(["resize", {"width": 20000, "height": 10000}]))
            # the first thing the console hears is the clamped resize: each piece of junk was dropped
            assert await next_data(ws) == {"type": "resize", "width": 500, "height": 200}
            await ws.send_str(json.dumps(["resize", {"width": 132, "height": 43}]))
            assert await next_data(ws) == {"type": "resize", "width": 132, "height": 43}
            await ws.send_str(json.dumps(["ping", "t1"]))
            assert json.loads((await asyncio.wait_for(ws.receive(), 30)).data) == ["pong", "t1"]
    finally:
        await served.stop()


async def test_a_session_over_the_cap_is_refused_at_once(tmp_path: Path, http: aiohttp.ClientSession) -> None:
    served = await start(tmp_path, max_sessions=2)
    try:
        first = await http.ws_connect(served.url + "ws")
        second = await http.ws_connect(served.url + "ws")
        pids = [(await next_data(ws))["pid"] for ws in (first, second)]
        async with http.ws_connect(served.url + "ws") as third:
            msg = await asyncio.wait_for(third.receive(), slack(10))  # told, not left waiting
            assert msg.type == aiohttp.WSMsgType.BINARY and b"2 console sessions open already" in msg.data
            msg = await asyncio.wait_for(third.receive(), slack(10))
            assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == aiohttp.WSCloseCode.TRY_AGAIN_LATER
        assert len(served.server.consoles) == 2  # type: ignore[attr-defined]
        # a closed tab frees its place: its console quits, and the next session gets one
        await first.close()
        await until_async("the closed session's console to quit", lambda: gone(int(str(pids[0]))), 30)
        await until_async("its place freed", lambda: len(served.server.consoles) <= 1, 30)  # type: ignore[attr-defined]
        async with http.ws_connect(served.url + "ws") as again:
            assert "pid" in await next_data(again)
        await second.close()
    finally:
        await served.stop()


async def test_a_console_that_ignores_quit_and_sigterm_is_killed_with_its_group(
        tmp_path: Path, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_session, "QUIT_GRACE_S", 0.5)
    monkeypatch.setattr(serve_session, "TERM_GRACE_S", 0.5)
    served = await start(tmp_path, "stubborn")
    try:
        ws = await http.ws_connect(served.url + "ws")
        hello = await next_data(ws)
        pid, child = int(str(hello["pid"])), int(str(hello["child"]))
        assert os.getpgid(pid) == pid != os.getpgid(0)  # a process group of its own, not the server's
        assert os.getpgid(child) == pid
    finally:
        started = time.monotonic()
        await served.stop()  # the server stops with the session open: the browser never said goodbye
    assert time.monotonic() - started < 15
    # SIGKILL was sent before stop() returned; the kernel ends a spinning process at its next scheduling
    await until_async(lambda: f"the console's group gone with the server: {live_in_group(pid)} (console {pid})",
                      lambda: not live_in_group(pid), 5)
    assert gone(pid) and gone(child)
