"""`bringup serve`'s session cookie (issue 29.11): the token is exchanged once for a random session id that maps to
an expiry in serve's memory; the token itself is never a cookie (browsers send a host's cookies to every port of it).
The real gate in a real aiohttp server on a free loopback port, with its clock a parameter, so that expiry is tested
without waiting hours."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tests.helpers.ports import free_port
from tui.cli.serve import Gate

TOKEN = "t0ken-of-the-test-0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def gated() -> AsyncIterator[tuple[str, Gate, Clock]]:
    """A page behind the gate (what the console's page is), on loopback; the gate's sessions last 60 s."""
    port = free_port()
    clock = Clock()
    gate = Gate(TOKEN, port, True, ttl_s=60, clock=clock)

    @web.middleware
    async def mw(request: web.Request, handler: object) -> web.StreamResponse:
        return await gate(request, handler)  # type: ignore[arg-type]

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="the console's page")

    app = web.Application(middlewares=[mw])
    app.router.add_get("/", page)
    app.router.add_get("/ws", page)
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
    assert "httponly" in attrs and "samesite=strict" in attrs and "path=/" in attrs and "max-age=60" in attrs, header
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


async def test_an_expired_session_is_refused_and_forgotten(gated: tuple[str, Gate, Clock]) -> None:
    url, gate, clock = gated
    _, _, sid = await login(url)
    clock.now += 59.9
    assert await get(url, sid, gate.cookie) == 200
    clock.now += 0.1
    assert await get(url + "ws", sid, gate.cookie) == 403
    assert await get(url, sid, gate.cookie) == 403  # the form again, saying why
    assert sid not in gate.sessions
    # a later login prunes every expired id, so the map does not grow with logins long gone
    _, _, old = await login(url)
    clock.now += 61
    _, _, fresh = await login(url)
    assert list(gate.sessions) == [fresh] and old not in gate.sessions
