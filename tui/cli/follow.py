"""`bringup wait` and `bringup demo --headless`: a wait's events printed as wait_lines.py prints them, for one
deployment here and for several by fleet.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from tui.config.demo import DEMO
from tui.config.settings import Settings
from tui.exit_codes import ExitCode
from tui.ops.wait import WaitEvent, WaitOutcome, wait

from .wait_lines import WaitLines, wait_exit_code

if TYPE_CHECKING:
    from tui.engine import Engine

#: the headless demo's bring-up takes well under a minute at the default time scale
DEMO_TIMEOUT_S = 600.0


async def cmd_wait(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import STALE_AFTER_S, Engine

    names = args.deployment if isinstance(args.deployment, list) else [args.deployment]
    if len(names) > 1:
        from .fleet import cmd_wait_many  # a fleet's engines: not imported by every command

        args.deployments = names
        return await cmd_wait_many(settings, args)
    name, dep = settings.deployment(names[0] if names else None)
    w = Engine(settings, name, dep)
    await w.start()
    try:
        lines = WaitLines(name, args.json, eta=lambda phase, at: w.history.on_entry(name, w.state, phase, at))
        return wait_exit_code(await wait(w, args.timeout, lines, stale_after=STALE_AFTER_S))
    finally:
        await w.close()


async def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    """The demo without the console: its phases as `wait` prints them, and its server stopped at the end unless
    `--keep` (Ctrl-C or `kill <pid>` too)."""
    lines = WaitLines(DEMO, args.json)

    def watching(w: Engine) -> None:  # its second start on has an ETA from the first
        lines.eta = lambda phase, at: w.history.on_entry(DEMO, w.state, phase, at)
    try:
        outcome = await run_demo(settings, lines, keep=args.keep, timeout=DEMO_TIMEOUT_S, watching=watching)
    except asyncio.CancelledError:
        return ExitCode.TERMINATED
    return wait_exit_code(outcome)


async def run_demo(settings: Settings, on_event: Callable[[WaitEvent], None], *, keep: bool,
                   timeout: float, watching: Callable[[Engine], None] | None = None) -> WaitOutcome:
    """The demo without the console: start it as configured (tui/ops/demo.py), follow it to ready (or failed) with
    `on_event` told every step, and stop the server this call started unless `keep`. `kill <pid>` ends it as Ctrl-C
    does: the task is cancelled, the server it started stopped, and the cancellation goes on to the caller."""
    from tui.engine import STALE_AFTER_S, Engine
    from tui.ops.demo import prepare, stop_demo

    w = Engine(settings, DEMO, settings.deployments[DEMO])
    if watching is not None:  # the caller reads what the engine knows beside the wait's events (its ETA)
        watching(w)
    started = False
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        if me is not None:
            loop.add_signal_handler(signal.SIGTERM, me.cancel)
    try:
        started = await prepare(w)
        await w.start()
        return await wait(w, timeout, on_event, stale_after=STALE_AFTER_S)
    finally:
        if started and not keep:
            await stop_demo(w)
        await w.close()
