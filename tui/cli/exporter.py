"""`bringup exporter`: the fleet's engines, headless, with their truth served at /metrics (tui/exporter/)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from tui.config.settings import Settings
from tui.exit_codes import ExitCode

from .args import UsageError
from .listen import ListenError, parse_listen
from .report import error, out


async def cmd_exporter(settings: Settings, args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server  # loaded by this command only, not by `bringup --help`

    from tui.engine.fleet import Fleet, deployment_names
    from tui.exporter.collector import registry_for

    try:
        host, port = parse_listen(args.listen, args.allow_remote)
    except ListenError as e:
        raise UsageError(str(e)) from None
    names = [settings.deployment(n)[0] for n in args.deployments] or deployment_names(settings)
    if not names:
        raise UsageError("no deployments configured (the built-in demo aside): name one, e.g. `bringup exporter "
                         f"demo`; {settings.config_source()}")
    loop = asyncio.get_running_loop()
    fleet = Fleet(settings, names)
    try:
        server, thread = start_http_server(port, host, registry=registry_for(fleet, loop))
    except OSError as e:  # in use, not permitted, no such address here: the --listen given cannot be had (2,
        await fleet.close()  # nothing was done, as for every other --listen that cannot be used)
        return error(f"--listen {args.listen}: cannot listen there: {e.strerror or e}", ExitCode.USAGE, args.json)
    stop = asyncio.Event()
    # systemd stops the service with SIGTERM: a clean stop (exit 0), like Ctrl-C's but not an interruption
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        fleet.start()
        where = f"http://{'[' + host + ']' if ':' in host else host}:{port}/metrics"
        out({"listen": where, "deployments": names}, args.json,
            f"serving {where} for {', '.join(names)} (Ctrl-C stops)")
        sys.stdout.flush()  # a service's journal, a test's pipe: the line now, not at exit
        await stop.wait()
        return ExitCode.OK
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)
        server.shutdown()
        server.server_close()
        thread.join(timeout=3.0)
        await fleet.close()
