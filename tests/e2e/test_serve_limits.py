"""`bringup serve`'s bounds on what a browser can make it spend (issue 29.10), through the command itself and the
real console: a websocket needs no token in read-only mode on loopback, so any local process can open sessions. At
most `serve_max_sessions` consoles run (one more is told so and closed, at once), and the terminal size is clamped to
500 x 200 cells in the query string and in every resize (the console draws to the clamped size: its own screen
updates say which rows it wrote)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.helpers.browser import Served, serve
from tests.helpers.simdeploy import write_config
from tests.helpers.wait import until

pytestmark = pytest.mark.slow

#: Textual's screen updates place each line with a cursor move: ESC [ row ; col H
_MOVE = re.compile(rb"\x1b\[(\d+);(\d+)H")


@pytest.fixture
def cfg(tmp_path: Path) -> Iterator[Path]:
    """The simulated deployment `sim` (never started here: the console only watches it), two sessions at most."""
    path = write_config(tmp_path)
    path.write_text("serve_max_sessions = 2\n" + path.read_text())
    yield path


def wait_consoles(served: Served, n: int, timeout: float = 30) -> list[int]:
    until(lambda: f"{n} consoles: {served.consoles()}", lambda: len(served.consoles()) == n, timeout)
    return served.consoles()


async def first_data(ws: aiohttp.ClientWebSocketResponse) -> bytes:
    msg = await asyncio.wait_for(ws.receive(), 60)
    assert msg.type == aiohttp.WSMsgType.BINARY, msg
    return bytes(msg.data)


async def next_frame(ws: aiohttp.ClientWebSocketResponse, until: Callable[[int], bool]) -> tuple[int, int]:
    """Read the console's output until a packet whose lowest line placed satisfies `until` (a frame drawn before a
    resize took effect may still be on its way); that packet's largest row and column."""
    while True:
        moves = [(int(r), int(c)) for r, c in _MOVE.findall(await first_data(ws))]
        if moves and until(rows := max(r for r, _ in moves)):
            return rows, max(c for _, c in moves)


def test_sessions_over_the_configured_cap_are_refused(cfg: Path) -> None:
    with serve(cfg, "sim") as served:
        async def sessions() -> None:
            async with aiohttp.ClientSession() as http:
                first = await http.ws_connect(served.url + "ws")
                second = await http.ws_connect(served.url + "ws")
                await first_data(first)
                await first_data(second)
                async with http.ws_connect(served.url + "ws") as third:
                    told = await first_data(third)
                    assert b"2 console sessions open already" in told and b"serve_max_sessions" in told, told
                    closed = await asyncio.wait_for(third.receive(), 10)
                    assert closed.type == aiohttp.WSMsgType.CLOSE, closed
                    assert closed.data == aiohttp.WSCloseCode.TRY_AGAIN_LATER
                assert len(served.consoles()) == 2  # the refused one started none
                await first.close()
                await second.close()
        asyncio.run(sessions())
        wait_consoles(served, 0)


def test_the_terminal_size_is_clamped_at_start_and_at_every_resize(cfg: Path) -> None:
    with serve(cfg, "sim") as served:
        async def session() -> None:
            async with aiohttp.ClientSession() as http, \
                    http.ws_connect(served.url + "ws?width=900&height=400") as ws:
                (console,) = wait_consoles(served, 1)
                environ = dict(v.split(b"=", 1) for v in Path(f"/proc/{console}/environ").read_bytes().split(b"\0")
                               if b"=" in v)
                assert (environ[b"COLUMNS"], environ[b"ROWS"]) == (b"500", b"200")
                assert (await next_frame(ws, lambda r: r >= 200))[0] == 200  # drawn 200 rows high, not 400
                await ws.send_str(json.dumps(["resize", {"width": 100, "height": 30}]))
                assert (await next_frame(ws, lambda r: r == 30))[1] <= 100
                # up again: the first frame past the 30 rows is 200 high, not 400
                await ws.send_str(json.dumps(["resize", {"width": 900, "height": 400}]))
                rows, cols = await next_frame(ws, lambda r: r > 30)
                assert rows == 200 and cols <= 500
        asyncio.run(session())
        wait_consoles(served, 0)
