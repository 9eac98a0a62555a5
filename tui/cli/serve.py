"""`bringup serve`: the same console in a browser, through textual-serve.

textual-serve runs one console process per browser session (`bringup --read-only console ...` under Textual's web
driver) and relays its screen over a websocket, so the browser sees exactly what a terminal would, from the same
code. What this module adds is the gate in front of it, because the console can restart a GPU server:

- read-only unless `--allow-actions`: the served console is the `--read-only` one, whose action keys only say so;
- a token (from `secrets`, printed once) whenever the console can act (`--allow-actions`, on loopback too: any user
  of a shared GPU host reaches its loopback) or listens beyond loopback, and wherever `--token` asks for one: the
  page asks for it in a POST form (never in the address, the history or a proxy's log) and keeps it in a cookie
  (HttpOnly, SameSite=Strict); a wrong token is refused with 403 before any console process starts;
- on loopback, only loopback names in the Host header (a web page that rebinds its own name to 127.0.0.1 is
  refused), and the websocket only from the page's own origin (another site open in the same browser cannot drive
  the console).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import re
import secrets
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tui.config import Settings
from tui.exit_codes import ExitCode

from .args import UsageError
from .report import error, out

if TYPE_CHECKING:
    from aiohttp import web

#: textual-serve's page links a font from Google's servers; the same font ships in its static files: the page
#: loads nothing from outside the box it is served from (an air-gapped GPU host, an SSH forward)
_REMOTE_FONT = re.compile(r'<link[^>]*fonts\.googleapis\.com[^>]*/>', re.S)
_LOCAL_FONT = ('<style>@font-face { font-family: "Roboto Mono"; '
               'src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"); }</style>')

_LOGIN = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>bringup: access token</title>
<style>body {{ background: #0c181f; color: #eee; font-family: monospace; display: flex; height: 90vh;
align-items: center; justify-content: center; }} input, button {{ font: inherit; padding: 6px; }}
.err {{ color: #f66; }}</style></head>
<body><form method="post" action="/"><p>bringup serve: the access token it printed at start</p>
<p class="err">{message}</p><input name="token" type="password" autofocus size="48" aria-label="access token">
<button type="submit">open the console</button></form></body></html>
"""


def console_command(config: str | None, names: list[str], read_only: bool) -> str:
    """The shell command textual-serve runs per browser session (it runs it through a shell; `exec` leaves the
    console as the process it stops at the end of the session)."""
    argv = [sys.executable, "-m", "tui"]
    if config:
        argv += ["--config", str(Path(config).resolve())]  # the same file whatever the session's directory
    if read_only:
        argv.append("--read-only")
    argv += ["console", *names]
    return "exec " + shlex.join(argv)


def _loopback_name(host_header: str) -> bool:
    from tui.exporter import is_loopback

    host = urlsplit("//" + host_header).hostname or ""
    return is_loopback(host)


class Gate:
    """The token check and the origin checks, as one aiohttp middleware. `token` None: no token asked (loopback,
    read-only, no --token)."""

    def __init__(self, token: str | None, port: int, loopback: bool) -> None:
        self.token = token
        self.loopback = loopback
        self.cookie = f"bringup-serve-{port}"  # cookies are per host, not per port: one per server

    def _ok(self, given: str | None) -> bool:
        return given is not None and self.token is not None and secrets.compare_digest(
            given.encode(), self.token.encode())

    def _login(self, status: int, message: str) -> web.Response:
        from aiohttp import web

        return web.Response(status=status, text=_LOGIN.format(message=html.escape(message)),
                            content_type="text/html", headers={"Cache-Control": "no-store"})

    async def __call__(self, request: web.Request,
                       handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        from aiohttp import web

        if self.loopback and not _loopback_name(request.host):
            raise web.HTTPForbidden(text="this console answers on loopback names only (127.0.0.1, localhost)\n")
        origin = request.headers.get("Origin")
        if request.path == "/ws" and origin is not None and urlsplit(origin).netloc != request.host:
            raise web.HTTPForbidden(text="the console's websocket opens from its own page only\n")
        if self.token is None:
            return await handler(request)
        if request.method == "POST" and request.path == "/":
            # the login form: the token in the body, never in the address (history, logs, a Referer)
            form = await request.post()
            given = form.get("token")
            if not isinstance(given, str) or not self._ok(given):
                return self._login(403, "wrong token")
            # in the cookie from now on; the redirect makes the page a plain GET (a reload posts nothing)
            resp = web.HTTPSeeOther(location="/")
            resp.set_cookie(self.cookie, given, httponly=True, samesite="Strict", path="/")
            raise resp
        cookie = request.cookies.get(self.cookie)
        if self._ok(cookie):
            return await handler(request)
        if request.path != "/":
            raise web.HTTPForbidden(text="no access token (open / first)\n")
        return self._login(403, "wrong token") if cookie else self._login(401, "")


def make_server(command: str, title: str, gate: Gate) -> Any:
    """textual-serve's Server, with the gate in front of every route, its page built for the address the browser
    used (an SSH forward on another local port works: textual-serve would write its own listen address into the
    page), and open sessions ended when the server stops."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web
    from textual_serve.server import Server, to_int

    class GatedServer(Server):
        def __init__(self) -> None:
            super().__init__(command, host="127.0.0.1", port=0, title=title)
            self.sessions: set[asyncio.Task[Any]] = set()

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            page = (Path(self.templates_path) / "app_index.html").read_text(encoding="utf-8")
            page = _REMOTE_FONT.sub(_LOCAL_FONT, page)
            aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": page}), autoescape=True)
            @web.middleware
            async def gated(request: web.Request, handler: Any) -> web.StreamResponse:
                return await gate(request, handler)
            app.middlewares.append(gated)
            return app

        async def on_startup(self, app: web.Application) -> None:
            """textual-serve prints its logo and address here; `cmd_serve` prints ours."""

        async def on_shutdown(self, app: web.Application) -> None:
            # a cancelled session closes its websocket and sends its console textual-serve's quit: no console
            # outlives the server
            for task in list(self.sessions):
                task.cancel()
            if self.sessions:
                await asyncio.wait(list(self.sessions), timeout=10)

        @aiohttp_jinja2.template("app_index.html")
        async def handle_index(self, request: web.Request) -> dict[str, Any]:
            base = f"{request.scheme}://{request.host}"
            static = request.app.router["static"].url_for(filename="/")
            return {
                "font_size": to_int(request.query.get("fontsize", "16"), 16),
                "app_websocket_url": ("wss:" if request.scheme == "https" else "ws:") + f"//{request.host}/ws",
                "config": {"static": {"url": f"{base}{static}".rstrip("/") + "/"}},
                "application": {"name": self.title},
            }

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            task = asyncio.current_task()
            assert task is not None
            self.sessions.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions.discard(task)

    return GatedServer()


async def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from aiohttp import web  # loaded by this command only, not by `bringup --help`

    from tui.exporter import ListenError, is_loopback, parse_listen

    try:
        host, port = parse_listen(args.listen, allow_remote=True)
    except ListenError as e:
        raise UsageError(str(e)) from None
    loopback = is_loopback(host)
    if not loopback and not args.token:
        raise UsageError(f"--listen {args.listen}: refusing a non-loopback address without an access token, anyone "
                         "who reaches it would watch the console (add --token: one is printed at start and the page "
                         "asks for it; or keep 127.0.0.1 and use an SSH forward: ssh -L 8000:127.0.0.1:8000 HOST)")
    names = [settings.deployment(n)[0] for n in args.deployments]  # an unknown name now, not in every session
    read_only = settings.read_only or not args.allow_actions  # read_only = true in the config wins
    # a console that can restart servers asks for a token even on loopback: every user of the host reaches it
    token = secrets.token_urlsafe(24) if args.token or not loopback or not read_only else None
    command = console_command(getattr(args, "config", None), names, read_only)
    server = make_server(command, "bringup " + (" ".join(names) or "console"), Gate(token, port, loopback))
    runner = web.AppRunner(await server._make_app(), handle_signals=False, access_log=None, shutdown_timeout=10)
    await runner.setup()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    try:
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as e:
            return error(f"cannot listen on {args.listen}: {e.strerror or e}", ExitCode.FAILED, args.json)
        url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
        mode = "read-only" if read_only else "actions allowed: r, f and s act on the deployment"
        out({"url": url, "read_only": read_only, "deployments": names, "token": token}, args.json,
            f"serving the console at {url} ({mode}; Ctrl-C stops)")
        if token is not None and not args.json:
            why = "" if args.token or not loopback else " (actions allowed: asked on loopback too)"
            print(f"access token (printed only now): {token}\n  the page at {url} asks for it{why}")
        sys.stdout.flush()  # a service's journal, a test's pipe: the lines now, not at exit
        # systemd stops a service with SIGTERM: a clean stop (exit 0), like Ctrl-C's but not an interruption
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        return ExitCode.OK
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)
        await runner.cleanup()
