"""bringup's HTTP clients never send a request on a connection the server is about to close.

The released servers close a connection idle for 5 s (uvicorn's `timeout_keep_alive`), silently; a request that
leaves at that moment fails as if the server were down. Here a real HTTP server on loopback drops, without an
answer, any request that arrives on a connection idle for longer than its own limit: what a request crossing the
server's close looks like from the client. The times are scaled down (the client's limit patched to 0.2 s, the
server's 0.6 s) so that the test waits less than a second; the rule it checks is the same: the client retires an
idle connection well before the server does.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tui.collectors import server_http
from tui.collectors.probes import Prober

SERVER_IDLE_S = 0.6


class _IdleClosing(http.server.BaseHTTPRequestHandler):
    """`/health` answered on a kept-alive connection, unless the connection was idle longer than SERVER_IDLE_S:
    then it is closed with no answer."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.last = time.monotonic()
        with self.server.lock:
            self.server.connections += 1

    def do_GET(self) -> None:
        if time.monotonic() - self.last > SERVER_IDLE_S:
            self.close_connection = True  # the server's close, crossing the request
            return
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.last = time.monotonic()

    def log_message(self, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _IdleClosing)
        self.lock = threading.Lock()
        self.connections = 0


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    thread = threading.Thread(target=s.serve_forever, daemon=True)
    thread.start()
    try:
        yield s
    finally:
        s.shutdown()
        s.server_close()


def _url(s: _Server) -> str:
    return f"http://127.0.0.1:{s.server_address[1]}"


async def test_probes_close_together_share_one_connection(server: _Server) -> None:
    p = Prober(_url(server), timeout=5)
    try:
        for _ in range(3):
            assert (await p.health()).ok
    finally:
        await p.close()
    assert server.connections == 1


async def test_a_probe_after_an_idle_spell_opens_a_new_connection_before_the_server_closes_the_old(
        server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle longer than the client's limit but not the server's: the old connection would still be open on the
    server, and the client does not use it. With httpx's default (5 s, the servers' own), this probe is sent on the
    old connection, and fails when the server closes it."""
    monkeypatch.setattr(server_http, "IDLE_S", 0.2)
    p = Prober(_url(server), timeout=5)
    try:
        assert (await p.health()).ok
        await asyncio.sleep(SERVER_IDLE_S + 0.2)  # the idle time is what is tested
        second = await p.health()
    finally:
        await p.close()
    assert second.ok, second.detail
    assert server.connections == 2


async def test_the_same_server_fails_a_client_that_keeps_its_connections_as_long_as_the_server(
        server: _Server) -> None:
    """The failure the limit prevents, shown with a client of httpx's default limits: the test above can fail."""
    async with httpx.AsyncClient(base_url=_url(server), trust_env=False) as client:
        assert (await client.get("/health")).status_code == 200
        await asyncio.sleep(SERVER_IDLE_S + 0.2)  # the idle time is what is tested
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get("/health")


def test_the_clients_retire_idle_connections_well_before_the_servers_close_them() -> None:
    assert server_http.IDLE_S <= server_http.SERVER_IDLE_CLOSE_S / 2
    assert server_http.limits().keepalive_expiry == server_http.IDLE_S
    assert server_http.limits(12).keepalive_expiry == server_http.IDLE_S
