"""`bringup serve DEP` shows what it was asked to show (issue 47.6): read-only, loopback, no token, so any local
user can open a session; that session's console is on DEP and no other deployment of the config, and its keys that
would probe the server or write a file say "read-only". The real command, a real websocket session, the real console
it runs (the page's own protocol: keys in as `["stdin", key]`, the screen out as the terminal's bytes)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from tests.helpers.browser import Served, _cmdline, serve
from tests.helpers.simdeploy import HIDDEN, config_with_another, write_config

pytestmark = pytest.mark.slow

#: a name found nowhere else on the console's screen (not in "another bringup...", not in a path)
#: the terminal's control sequences (CSI, OSC, and two-byte escapes): what is left is the text drawn
_CONTROL = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class Session:
    """One browser session's console over the websocket: what it has drawn so far, as text."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.drawn = b""

    async def key(self, key: str) -> None:
        await self.ws.send_str(json.dumps(["stdin", key]))

    async def until(self, what: str, timeout: float = 60) -> str:
        """Read the console's output until `what` has been drawn; all of it, as text."""
        deadline = time.monotonic() + timeout
        while what.encode() not in (text := _CONTROL.sub(b"", self.drawn)):
            left = deadline - time.monotonic()
            assert left > 0, f"the console never drew {what!r}; it drew:\n{text.decode(errors='replace')[-3000:]}"
            try:
                msg = await asyncio.wait_for(self.ws.receive(), left)
            except TimeoutError:
                continue
            assert msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), msg
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.drawn += bytes(msg.data)
        return text.decode(errors="replace")


async def session(served: Served, test: Callable[[Session], Awaitable[None]]) -> None:
    """`test` run on a new session of the served console (a terminal of 140 x 40)."""
    async with aiohttp.ClientSession() as http, http.ws_connect(served.url + "ws?width=140&height=40") as ws:
        await test(Session(ws))


def test_a_served_deployment_is_the_only_one_its_console_can_open(tmp_path: Path) -> None:
    cfg = config_with_another(tmp_path)
    with serve(cfg, "sim") as served:
        async def picker(s: Session) -> None:
            await s.until("Filter")  # the key bar: the console is up and reads keys
            await s.key("d")
            text = await s.until("this console shows sim only")
            assert HIDDEN not in text, text
            # the console it runs is told so on its command line: no other deployment is in its settings
            (pid,) = served.consoles()
            assert b"--only" in _cmdline(pid) and HIDDEN.encode() not in b" ".join(_cmdline(pid))

        asyncio.run(session(served, picker))


def test_the_served_console_s_probe_and_record_keys_say_read_only(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    with serve(cfg, "sim") as served:
        async def keys(s: Session) -> None:
            await s.until("Filter")
            await s.key("g")
            await s.until("read-only: no probe")
            await s.key("i")
            await s.until("read-only: no incident record")

        asyncio.run(session(served, keys))
    assert not (tmp_path / "state" / "deployments").exists()  # nothing written under the state directory
