"""`bringup serve`: the same console in a browser, through textual-serve.

textual-serve serves the page (its xterm.js terminal) and its static files; each browser session runs its own console
process (`bringup --read-only console ...` under Textual's web driver, `serve_session.py`), so the browser sees
exactly what a terminal would, from the same code. What this module adds is the gate in front of it, because the
console can restart a GPU server, and the bounds on what a browser can make it spend:

- what it was asked to show: each session's console is `console --only NAMES`, whose settings hold the deployments
  served and no other (tui/console/scope.py): its picker and overview list none else, and nothing opens one;
- read-only unless `--allow-actions`: the served console is the `--read-only` one, where every action that changes
  the deployment, sends its server work or writes a file only says so (one gate: tui/console/gate.py);
- a token (from `secrets`, printed once) whenever the console can act (`--allow-actions`, on loopback too: any user
  of a shared GPU host reaches its loopback) or listens beyond loopback, and wherever `--token` asks for one: the
  page asks for it in a POST form (never in the address, the history or a proxy's log) and exchanges it for a
  session cookie: a random id that maps to a session in this process's memory. The cookie is a browser session's
  (no Max-Age or Expires: it ends when the browser does), HttpOnly, SameSite=Strict, Path=/ (the page is the root:
  no narrower path would reach it); and the session ends here after `SESSION_IDLE_S` with no request and no console
  open, and `SESSION_MAX_S` after the token was given in any case: browsers send a host's cookies to every port of it,
  so the id must not be a lasting credential. The token itself is never a cookie. A wrong token, and an unknown or
  expired session, is refused before any console process starts;
- on loopback, only loopback names in the Host header (a web page that rebinds its own name to 127.0.0.1 is
  refused), and the websocket only from the page's own origin (another site open in the same browser cannot drive
  the console);
- at most `serve_max_sessions` consoles at once (each is an engine and, remotely, an SSH connection): one more
  session is told so in its terminal and closed, not left waiting.
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
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tui.config.settings import Settings
from tui.exit_codes import ExitCode

from .args import UsageError
from .listen import ListenError, is_loopback, parse_listen
from .report import error, out
from .serve_session import DEFAULT_SIZE, Console, all_stopped, clamp_size

if TYPE_CHECKING:
    from aiohttp import web

#: textual-serve's page links a font from Google's servers; the same font ships in its static files: the page
#: loads nothing from outside the box it is served from (an air-gapped GPU host, an SSH forward)
_REMOTE_FONT = re.compile(r'<link[^>]*fonts\.googleapis\.com[^>]*/>', re.S)
_LOCAL_FONT = ('<style>@font-face { font-family: "Roboto Mono"; '
               'src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"); }</style>')

#: a session ends after this long with no request and no console open (a tab left closed, a laptop asleep)...
SESSION_IDLE_S = 15 * 60.0
#: ...and this long after the token was given in any case (a reload or a new tab after that asks for it again; an
#: open tab's console keeps running)
SESSION_MAX_S = 2 * 3600.0

_LOGIN = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>bringup: access token</title>
<style>body {{ background: #0c181f; color: #eee; font-family: monospace; display: flex; height: 90vh;
align-items: center; justify-content: center; }} input, button {{ font: inherit; padding: 6px; }}
.err {{ color: #f66; }}</style></head>
<body><form method="post" action="/"><p>bringup serve: the access token it printed at start</p>
<p class="err">{message}</p><input name="token" type="password" autofocus size="48" aria-label="access token">
<button type="submit">open the console</button></form></body></html>
"""


def console_argv(config: str | None, names: list[str], read_only: bool) -> list[str]:
    """The console each browser session runs, as an argv (no shell: a deployment's name is one word, whatever it
    holds): `--only`, so that it shows `names` and no other deployment of the config."""
    argv = [sys.executable, "-m", "tui"]
    if config:
        argv += ["--config", str(Path(config).resolve())]  # the same file whatever the session's directory
    if read_only:
        argv.append("--read-only")
    return [*argv, "console", "--only", *names]


def served_names(settings: Settings, given: list[str]) -> list[str]:
    """The deployments served: those named (each resolved now, not in every session), else what `bringup console`
    shows with none named: every configured deployment (the built-in demo aside), or the one there is."""
    from tui.engine.fleet import deployment_names

    names = [settings.deployment(n)[0] for n in given] or deployment_names(settings)
    return list(dict.fromkeys(names)) or [settings.deployment(None)[0]]


def _loopback_name(host_header: str) -> bool:
    host = urlsplit("//" + host_header).hostname or ""
    return is_loopback(host)


@dataclass(slots=True)
class Session:
    """One browser session, by `Gate.clock`: when it ends in any case, when it was last used, its consoles open."""

    ends: float
    used: float
    consoles: int = 0

    def over(self, now: float, idle_s: float) -> bool:
        return now >= self.ends or (self.consoles == 0 and now - self.used >= idle_s)


class Gate:
    """The token check, the session cookies and the origin checks, as one aiohttp middleware. `token` None: no token
    asked (loopback, read-only, no --token). A right token is answered with a new session id, valid only in this
    process (a restart of serve asks for the token again) until `idle_s` pass with no request and no console open,
    or `max_s` after it was given (by `clock`, a parameter so that a test can move time)."""

    def __init__(self, token: str | None, port: int, loopback: bool, *, idle_s: float = SESSION_IDLE_S,
                 max_s: float = SESSION_MAX_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.token = token
        self.loopback = loopback
        self.cookie = f"bringup-serve-{port}"  # cookies are per host, not per port: one name per server
        self.idle_s = idle_s
        self.max_s = max_s
        self.clock = clock
        self.sessions: dict[str, Session] = {}

    def _token_ok(self, given: str) -> bool:
        return self.token is not None and secrets.compare_digest(given.encode(), self.token.encode())

    def _session(self, sid: str | None) -> Session | None:
        """The live session of `sid`, marked used now; None (and forgotten) when it is unknown or over."""
        session = self.sessions.get(sid) if sid else None
        if session is None:
            return None
        now = self.clock()
        if session.over(now, self.idle_s):
            del self.sessions[sid]  # type: ignore[arg-type]  # sid is a str whenever a session was found
            return None
        session.used = now
        return session

    def new_session(self) -> str:
        now = self.clock()
        for sid in [s for s, session in self.sessions.items() if session.over(now, self.idle_s)]:
            del self.sessions[sid]
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = Session(ends=now + self.max_s, used=now)
        return sid

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
            if not isinstance(given, str) or not self._token_ok(given):
                return self._login(403, "wrong token")
            # a session id in the cookie from now on, never the token; the redirect makes the page a plain GET
            resp = web.HTTPSeeOther(location="/", headers={"Cache-Control": "no-store"})
            # a browser session's cookie: no max_age or expires, so it is gone when the browser closes
            resp.set_cookie(self.cookie, self.new_session(), httponly=True, samesite="Strict", path="/")
            raise resp
        cookie = request.cookies.get(self.cookie)
        session = self._session(cookie)
        if session is not None:
            if request.path != "/ws":
                return await handler(request)
            session.consoles += 1  # a console open keeps its session from idling out (its page makes no requests)
            try:
                return await handler(request)
            finally:
                session.consoles -= 1
                session.used = self.clock()
        if request.path != "/":
            raise web.HTTPForbidden(text="no session (open / and give the access token)\n")
        return self._login(403, "unknown or expired session: the token again") if cookie else self._login(401, "")


def _refusal(limit: int) -> bytes:
    return (f"\r\nbringup serve: {limit} console session{'s' if limit != 1 else ''} open already, the most it runs "
            "at once (serve_max_sessions in the config).\r\nClose another tab, then reload this one.\r\n").encode()


def make_server(argv: list[str], title: str, gate: Gate, max_sessions: int) -> Any:
    """textual-serve's Server for the page and its static files, with the gate in front of every route, its page
    built for the address the browser used (an SSH forward on another local port works: textual-serve would write its
    own listen address into the page), and the websocket ours: a console per session (`serve_session.Console`), at
    most `max_sessions` at once, every one of them stopped (and reaped) before the server has stopped."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import WSCloseCode, WSMsgType, web
    from textual_serve.server import Server, to_int

    class GatedServer(Server):
        def __init__(self) -> None:
            super().__init__(shlex.join(argv), host="127.0.0.1", port=0, title=title)
            self.consoles: set[Console] = set()

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
            # every console stopped (quit, SIGTERM, SIGKILL to its group) and reaped: none outlives the server
            await asyncio.gather(*(c.stop() for c in list(self.consoles)))

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
            ws = web.WebSocketResponse(heartbeat=15)
            await ws.prepare(request)
            if len(self.consoles) >= max_sessions:  # counted and added with no await between: no race
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await ws.send_bytes(_refusal(max_sessions))
                    await ws.close(code=WSCloseCode.TRY_AGAIN_LATER, message=b"too many sessions")
                return ws
            size = clamp_size(request.query.get("width", "80"), request.query.get("height", "24")) or DEFAULT_SIZE
            console = Console(argv, *size)
            self.consoles.add(console)
            try:
                await console.start()
                relay = asyncio.create_task(console.relay(ws.send_bytes, ws.close))
                try:
                    async for message in ws:
                        if message.type == WSMsgType.TEXT:
                            await console.on_message(message.data, ws.send_json)
                finally:
                    await console.stop()
                    relay.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await relay
            finally:
                self.consoles.discard(console)
            return ws

    return GatedServer()


async def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from aiohttp import web  # loaded by this command only, not by `bringup --help`

    try:
        host, port = parse_listen(args.listen, allow_remote=True)
    except ListenError as e:
        raise UsageError(str(e)) from None
    loopback = is_loopback(host)
    if not loopback and not args.token:
        raise UsageError(f"--listen {args.listen}: refusing a non-loopback address without an access token, anyone "
                         "who reaches it would watch the console (add --token: one is printed at start and the page "
                         "asks for it; or keep 127.0.0.1 and use an SSH forward: ssh -L 8000:127.0.0.1:8000 HOST)")
    names = served_names(settings, args.deployments)  # an unknown name now, not in every session
    read_only = settings.read_only or not args.allow_actions  # read_only = true in the config wins
    # a console that can restart servers asks for a token even on loopback: every user of the host reaches it
    token = secrets.token_urlsafe(24) if args.token or not loopback or not read_only else None
    argv = console_argv(getattr(args, "config", None), names, read_only)
    server = make_server(argv, "bringup " + (" ".join(names) or "console"), Gate(token, port, loopback),
                         settings.serve_max_sessions)
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
        await all_stopped()  # a tab closed just before: its console's stop is finished, not cancelled at exit
