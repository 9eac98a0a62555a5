"""`bringup serve`'s session cookie (issue 29.11): the token is exchanged once for a random session id that maps to
a session in serve's memory; the token itself is never a cookie (browsers send a host's cookies to every port of it).
Nor is the id a lasting credential (issue 47.6): the cookie ends with the browser (no Max-Age, no Expires), and the
session ends here when idle (no request, no console open) and a short while after the token was given in any case.
The real gate in a real aiohttp server on a free loopback port, with its clock a parameter, so that expiry is tested
without waiting hours."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tests.helpers.ports import free_port
from tests.helpers.wait import until_async
from tui.cli.serve import Gate

TOKEN = "t0ken-of-the-test-0123456789abcdef"


class Clock:
    """The gate's clock, moved by the test; and when the stand-in console at /ws answers (`release`)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.release = asyncio.Event()
        self.release.set()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def gated() -> AsyncIterator[tuple[str, Gate, Clock]]:
    """A page behind the gate (what the console's page is), on loopback; the gate's sessions idle out after 60 s
    and end 600 s after the token in any case. `/ws` stands for the console's websocket: it answers once the test
    sets `release` (a console open until then)."""
    port = free_port()
    clock = Clock()
    gate = Gate(TOKEN, port, True, idle_s=60, max_s=600, clock=clock)

    @web.middleware
    async def mw(request: web.Request, handler: object) -> web.StreamResponse:
        return await gate(request, handler)  # type: ignore[arg-type]

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="the console's page")

    async def console(request: web.Request) -> web.Response:
        await clock.release.wait()
        return web.Response(text="the console")

    app = web.Application(middlewares=[mw])
    app.router.add_get("/", page)
    app.router.add_get("/ws", console)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/", gate, clock
    finally:
        await runner.cleanup()


async def login(url: str) -> tuple[int, str, str]:
    """The form's POST: the status, the Set-Cookie header and the cookie's value."""
    async with aiohttp.ClientSession() as s, s.post(url, data={"token": TOKEN}, allow_redirects=False) as r:
        header = r.headers.get("Set-Cookie", "")
        morsel = next(iter(r.cookies.values()), None)
        return r.status, header, morsel.value if morsel else ""


async def get(url: str, cookie: str | None, name: str) -> int:
    async with aiohttp.ClientSession(cookies={name: cookie} if cookie else None) as s, s.get(url) as r:
        return r.status


async def test_the_token_is_exchanged_for_a_session_id(gated: tuple[str, Gate, Clock]) -> None:
    url, gate, _ = gated
    status, header, sid = await login(url)
    assert status == 303
    assert sid and sid != TOKEN and TOKEN not in header
    attrs = [a.strip().lower() for a in header.split(";")]
    assert "httponly" in attrs and "samesite=strict" in attrs and "path=/" in attrs, header
    # a browser session's cookie: gone when the browser closes, never a credential that outlives it
    assert not any(a.startswith(("max-age", "expires")) for a in attrs), header
    assert list(gate.sessions) == [sid]
    for path in ("", "ws"):
        assert await get(url + path, sid, gate.cookie) == 200
    # a second login is a second session; the first stays valid
    _, _, sid2 = await login(url)
    assert sid2 != sid and await get(url, sid, gate.cookie) == 200 and await get(url, sid2, gate.cookie) == 200


async def test_the_token_an_unknown_id_and_no_cookie_are_refused(gated: tuple[str, Gate, Clock]) -> None:
    url, gate, _ = gated
    _, _, sid = await login(url)
    assert await get(url, None, gate.cookie) == 401  # the form
    for forged in (TOKEN, sid[:-1], sid + "x", "x" * len(sid)):
        assert await get(url, forged, gate.cookie) == 403, forged
        assert await get(url + "ws", forged, gate.cookie) == 403, forged
    async with aiohttp.ClientSession() as s, s.post(url, data={"token": "guess"}, allow_redirects=False) as r:
        assert r.status == 403 and "Set-Cookie" not in r.headers


async def test_an_idle_session_is_refused_and_forgotten(gated: tuple[str, Gate, Clock]) -> None:
    url, gate, clock = gated
    _, _, sid = await login(url)
    clock.now += 59.9
    assert await get(url, sid, gate.cookie) == 200  # a request: idle from now
    clock.now += 59.9
    assert await get(url, sid, gate.cookie) == 200
    clock.now += 60
    assert await get(url + "ws", sid, gate.cookie) == 403
    assert await get(url, sid, gate.cookie) == 403  # the form again, saying why
    assert sid not in gate.sessions
    # a later login prunes every expired id, so the map does not grow with logins long gone
    _, _, old = await login(url)
    clock.now += 61
    _, _, fresh = await login(url)
    assert list(gate.sessions) == [fresh] and old not in gate.sessions


async def test_an_open_console_keeps_its_session_until_the_end_of_its_life(gated: tuple[str, Gate, Clock]) -> None:
    """The console's page makes no requests while its console runs: an open console is not idleness, and idleness
    counts from its close. Whatever the use, a session ends `max_s` after its token was given."""
    url, gate, clock = gated
    _, _, sid = await login(url)
    clock.release.clear()
    console = asyncio.ensure_future(get(url + "ws", sid, gate.cookie))
    await until_async("the console counted in its session", lambda: gate.sessions[sid].consoles == 1, every=0.01)
    clock.now += 300  # idle far past 60 s, but with its console open
    assert await get(url, sid, gate.cookie) == 200
    clock.now += 200
    clock.release.set()
    assert await console == 200
    clock.now += 59.9  # idle from the console's close
    assert await get(url, sid, gate.cookie) == 200
    clock.now += 39.9  # 599.8 s after the token; its last request 39.9 s ago
    assert await get(url, sid, gate.cookie) == 200
    clock.now += 0.3
    assert await get(url, sid, gate.cookie) == 403 and sid not in gate.sessions
