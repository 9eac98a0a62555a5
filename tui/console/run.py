"""Running the console as a program: the class for the mode, the exit status, and the terminal hanging up (the
demo server stopped either way)."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import signal
import sys
import threading

from tui.config.demo import DEMO
from tui.config.settings import Settings
from tui.console.control import ControlConsoleApp
from tui.console.viewer import ConsoleApp
from tui.engine import Engine
from tui.engine.fleet import deployment_names
from tui.exit_codes import ExitCode
from tui.guard.text import split_lines
from tui.transport.local import kill_all_children


def _stop_demo(settings: Settings, name: str) -> None:
    from tui.ops.demo import stop_demo

    async def _stop() -> None:
        w = Engine(settings, name, settings.deployments[name])
        try:
            await stop_demo(w)
        finally:
            await w.close()

    asyncio.run(_stop())


def _on_hangup(settings: Settings, name: str, stop_demo: bool) -> None:
    """The terminal is gone: Textual cannot restore it (its shutdown can block writing to a dead tty), so end
    here: kill the commands we started, stop the demo server, exit. Runs in a thread of its own."""
    try:
        kill_all_children()
        if stop_demo:
            _stop_demo(settings, name)
        kill_all_children()
    finally:
        os._exit(ExitCode.HANGUP)


def check_keymap(settings: Settings) -> None:
    """`[ui] keys` checked against every screen's actions before the console starts (ConfigError: one line)."""
    if not settings.ui.keys:
        return
    from tui.config.parts import ConfigError
    from tui.console.keys import keymap_problem
    from tui.console.screen import ControlConsoleScreen
    from tui.screens.confirm import ConfirmScreen
    from tui.screens.flags import FlagsScreen
    from tui.screens.fleet import FleetScreen
    from tui.screens.sweep import SweepScreen

    problem = keymap_problem((ControlConsoleScreen, FleetScreen, FlagsScreen, ConfirmScreen, SweepScreen),
                             settings.ui.keys)
    if problem:
        raise ConfigError(problem)


def run_app(settings: Settings, deployment: str | None, *, read_only: bool = False, demo_keep: bool = False,
            fleet: list[str] | None = None, only: list[str] | None = None) -> int:
    """`deployment` None with several configured: the fleet overview first (one deployment: that one's console);
    `fleet`: the overview of those deployments only; `only`: the deployments the console may show, no other
    (tui/console/scope.py)."""
    fleet = list(fleet) if fleet else deployment_names(settings) if deployment is None else []
    if len(fleet) < 2:
        fleet = []
    name = fleet[0] if fleet else settings.deployment(deployment)[0]
    cls = ConsoleApp if read_only else ControlConsoleApp
    app = cls(settings, name, demo=name == DEMO, fleet=fleet, only=only or ())
    stop_demo = name == DEMO and not demo_keep

    def hangup(signum: int, frame: object) -> None:
        threading.Thread(target=_on_hangup, args=(settings, name, stop_demo and app.demo_started),
                         daemon=True).start()

    signal.signal(signal.SIGHUP, hangup)
    # everything imported and built so far lives as long as the process: out of the collector's full passes, which
    # otherwise walk it again and again while log lines stream in
    gc.freeze()
    code = app.run()
    if stop_demo and app.demo_started:
        _stop_demo(settings, name)
    return exit_status(app, code)


def exit_status(app: ConsoleApp, result: int | None) -> int:
    """The console's exit status: its own (q: 0; SIGTERM or SIGINT: 128 + N), or, when it died of an uncaught
    exception, Textual's non-zero return code (1) and one line on stderr under the traceback Textual printed
    after restoring the terminal. `app.run()` returns None then, which must never read as a clean exit to a
    script or a unit that runs the console."""
    if app.return_code:
        why = uncaught_error(app.error_console.export_text(clear=False)) or "an uncaught error"
        print(f"bringup: the console stopped on an unexpected error: {why} (a bug in bringup: please report it "
              "with the traceback above)", file=sys.stderr)
        return app.return_code
    return result or ExitCode.OK


#: the last line of a traceback as Rich prints it: the exception's type, a colon, its message
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*: ")


def uncaught_error(printed: str) -> str:
    """`Type: message` of the exception whose traceback Textual printed on its error console (the console's own,
    recording: Textual keeps the exception itself to itself), the message's folded lines joined; "" if none."""
    lines = split_lines(printed.rstrip())
    for i in range(len(lines) - 1, -1, -1):
        if _EXC_LINE.match(lines[i]):
            return " ".join(ln.strip() for ln in lines[i:] if ln.strip())
    return ""
