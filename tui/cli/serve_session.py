"""One browser session of `bringup serve`: its console as a process group of its own, relayed over the websocket,
and ended with a deadline.

textual-serve's own session runner starts the console through a shell in serve's process group and, at the end, only
asks it to quit. A console that did not (its browser killed, its loop busy) outlived serve, spinning, and its pipes'
transports were collected after the loop had closed (`Event loop is closed`). Here the console is started from an
argv (no shell: nothing the browser sends is ever a command word) in a new session, so its process group is its own;
stopping it is the console's quit, then SIGTERM to the group, then SIGKILL, each after a deadline, and the process is
reaped before `stop()` returns. The browser's terminal size is clamped on the way in, at start and at every resize: a
page asking for 20000 x 10000 cells made its console draw gigabytes.

The wire formats are textual-serve's and Textual's web driver's: the browser sends JSON lists (`["stdin", text]`,
`["resize", {"width", "height"}]`, `["ping", x]`, `["focus"]`, `["blur"]`); the console reads and writes packets of
one type byte (`D` data, `M` JSON meta, `P` packed), a 4-byte big-endian length and the payload, after a line
`__GANGLION__`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from tui.guard.numbers import whole_or_none

#: the largest terminal a browser may ask for: a 4K screen at a small font is about 400 x 120 cells
MAX_WIDTH, MAX_HEIGHT = 500, 200
DEFAULT_SIZE = (80, 24)
#: how long the console has to act on its quit, and then on SIGTERM, before the next step
QUIT_GRACE_S = 3.0
TERM_GRACE_S = 3.0
_GANGLION = b"__GANGLION__\n"
#: every console stop under way: serve waits for them all before its event loop closes, so that no console's stop
#: is cancelled half-way (a console left unreaped, "Event loop is closed" at exit) when a tab closed just before
_STOPS: set[asyncio.Future[None]] = set()


async def all_stopped() -> None:
    """Return once every console stop begun so far has finished (each has its own deadline: QUIT, TERM, KILL)."""
    while _STOPS:
        await asyncio.gather(*list(_STOPS), return_exceptions=True)


def clamp_size(width: object, height: object) -> tuple[int, int] | None:
    """A terminal size the browser asked for (the query string's text, a resize message's numbers), within
    1..MAX_WIDTH x 1..MAX_HEIGHT; None when either is not a whole number (the message is then ignored)."""
    dims = []
    for v in (width, height):
        if isinstance(v, bool) or not isinstance(v, int | str):
            return None
        n = whole_or_none(v, text=True)  # digits only (tui/guard/numbers.py)
        if n is None:  # not a number, or more digits than a size has
            return None
        dims.append(n)
    return min(max(dims[0], 1), MAX_WIDTH), min(max(dims[1], 1), MAX_HEIGHT)


def _packet(kind: bytes, payload: bytes) -> bytes:
    return kind + len(payload).to_bytes(4, "big") + payload


class Console:
    """One session's console process: started by `start()`, its screen relayed by `relay()`, ended by `stop()`
    (which any number of callers may await: the handler that ends with the tab, and the server that stops)."""

    def __init__(self, argv: list[str], width: int, height: int) -> None:
        self.argv = argv
        self.size = (width, height)
        self.proc: asyncio.subprocess.Process | None = None
        self._stopping: asyncio.Future[None] | None = None

    async def start(self) -> None:
        width, height = self.size
        env = {**os.environ, "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "TEXTUAL_FPS": "60",
               "TEXTUAL_COLOR_SYSTEM": "truecolor", "TERM_PROGRAM": "textual",
               "TERM_PROGRAM_VERSION": version("textual-serve"), "COLUMNS": str(width), "ROWS": str(height)}
        # its own session: its own process group, which stop() signals whole; no terminal's Ctrl-C reaches it
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
            start_new_session=True)

    async def relay(self, send: Callable[[bytes], Awaitable[Any]], close: Callable[[], Awaitable[Any]]) -> None:
        """The console's screen to the browser until the console exits or says it has; then the websocket closes."""
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        try:
            for _ in range(10):  # Textual's web driver says __GANGLION__ before its first packet
                line = await out.readline()
                if not line or line == _GANGLION:
                    break
            while True:
                kind = await out.readexactly(1)
                payload = await out.readexactly(int.from_bytes(await out.readexactly(4), "big"))
                if kind == b"D":
                    await send(payload)
                elif kind == b"M" and json.loads(payload).get("type") == "exit":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, RuntimeError, ValueError):
            pass  # the console gone, the websocket gone, or a packet that is not one: the session is over
        with contextlib.suppress(ConnectionError, RuntimeError):
            await close()

    async def write(self, kind: bytes, payload: bytes) -> None:
        stdin = self.proc.stdin if self.proc is not None else None
        if stdin is None or stdin.is_closing():
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            stdin.write(_packet(kind, payload))
            await stdin.drain()

    async def meta(self, **data: object) -> None:
        await self.write(b"M", json.dumps(data).encode())

    async def on_message(self, text: str, pong: Callable[[Any], Awaitable[None]]) -> None:
        """One message of the browser's, passed on as the console's input; a size is clamped, and anything else
        (not JSON, an unknown kind) is dropped."""
        try:
            envelope = json.loads(text)
        except ValueError:
            return
        if not isinstance(envelope, list) or not envelope:
            return
        kind, arg = envelope[0], (envelope[1] if len(envelope) > 1 else None)
        if kind == "stdin" and isinstance(arg, str):
            await self.write(b"D", arg.encode())
        elif kind == "resize" and isinstance(arg, dict):
            if (size := clamp_size(arg.get("width"), arg.get("height"))) is not None:
                await self.meta(type="resize", width=size[0], height=size[1])
        elif kind == "ping":
            await pong(["pong", arg])
        elif kind in ("focus", "blur"):
            await self.meta(type=kind)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def stop(self) -> None:
        """Quit, SIGTERM to the group after QUIT_GRACE_S, SIGKILL after TERM_GRACE_S more; returns once the console
        is reaped and its group signalled to the end. A caller cancelled while waiting leaves the stop running."""
        if self.proc is None:
            return
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop(self.proc))
            _STOPS.add(self._stopping)
            self._stopping.add_done_callback(_STOPS.discard)
        await asyncio.shield(self._stopping)

    async def _stop(self, proc: asyncio.subprocess.Process) -> None:
        await self.meta(type="quit")
        for sig, grace in ((None, QUIT_GRACE_S), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, None)):
            if sig is not None:
                self._signal_group(sig)
            try:
                await asyncio.wait_for(proc.wait(), grace)
                break
            except TimeoutError:
                continue
        # whatever the console left in its group (a local transport's `journalctl -f`) goes with it
        self._signal_group(signal.SIGKILL)
        if proc.stdin is not None:
            proc.stdin.close()
