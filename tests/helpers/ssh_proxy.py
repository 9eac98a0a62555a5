"""A loopback TCP proxy to an sshd that can swallow the link: the half-open link (a network blackhole, a hung host)
the SSH tests put between bringup and the test host, of each test's own (port 0), so they run in parallel."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


class Proxy:
    """A loopback TCP proxy to the test host's sshd. `blackhole()` stops forwarding in both directions while every
    socket stays open (a network that swallows packets, a host that hung): the connections of that moment never
    carry a byte again, and new ones are accepted but get nothing. `resume()` lets new connections through."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.blackholed = False
        self.to_client = 0  # bytes forwarded from the host since the start
        self.swallowed_from_client = 0  # bytes the client sent into the blackhole
        self._server: asyncio.Server | None = None
        self._dead: list[dict[str, Any]] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def blackhole(self) -> None:
        self.blackholed = True
        for pair in self._dead:
            pair["dead"] = True

    def resume(self) -> None:
        self.blackholed = False

    async def _pump(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, pair: dict[str, Any],
                    down: bool) -> None:
        with contextlib.suppress(OSError):
            while data := await r.read(65536):
                if pair["dead"]:
                    if not down:
                        self.swallowed_from_client += len(data)
                    continue
                if down:
                    self.to_client += len(data)
                w.write(data)
                await w.drain()
        if not pair["dead"]:
            w.close()

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        pair: dict[str, Any] = {"dead": self.blackholed}
        self._dead.append(pair)
        self._writers.append(cw)
        if pair["dead"]:
            with contextlib.suppress(OSError):
                while data := await cr.read(65536):
                    self.swallowed_from_client += len(data)
            return
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            cw.close()
            return
        self._writers.append(uw)
        await asyncio.gather(self._pump(cr, uw, pair, False), self._pump(ur, cw, pair, True))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            w.transport.abort()
        live = [t for t in self._handlers if not t.done()]
        if live:  # they end once their sockets are gone; a handler left pending is cancelled noisily at loop close
            await asyncio.wait(live, timeout=5)
