"""`bringup demo`'s server: the built-in simulated SGLang deployment brought to its configured command, and stopped.

The demo is an ordinary `process` deployment (its set-up: tui/config/demo.py); nothing in the engine knows it is
simulated. Starting it goes through the same protocol as any start, so even the demo waits for GPU memory. The
console (tui/console/engines.py) and the headless demo (tui/cli/follow.py) both bring it up here, on an engine seen
through `DemoEngine`: restart's view of it and the command line it runs.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

from tui.config.deployments import ProcessDeployment
from tui.managers import ManagerError
from tui.ops import restart as protocol
from tui.ops.change import shown_diff
from tui.ops.config_drift import BASE, reconcile
from tui.ops.engine_view import EngineView


class DemoEngine(EngineView, Protocol):
    """What the demo's bring-up uses of an engine: restart's view, and the command line the running server has."""

    async def argv(self) -> list[str]: ...


def _stderr(text: str) -> None:
    print(f"bringup demo: {text}", file=sys.stderr)


async def prepare(w: DemoEngine, say: Callable[[str], None] = _stderr, *, restart_running: bool = True) -> bool:
    """Make sure the demo server runs the configured command (scenario, time scale); start it if needed. True when
    this call started (or restarted) it: only then is it this process's to stop on exit. A demo already running as
    wanted, started by `bringup start demo` or another console, is left running. `say` tells the user what
    happened (the console shows it: its stderr is behind the screen)."""
    wanted = await _wanted(w, say)
    unit = await w.poll_unit()
    current = list(unit.argv) if unit.running else None
    if current == wanted:
        return False
    if current is not None and not restart_running:
        # a console opened on the demo watches the demo that runs, someone else's perhaps: it never restarts it
        say("the running demo has other settings (scenario, time scale) than asked: watching it as it is "
            "(`bringup demo` restarts it with these)")
        return False

    def quiet(step: protocol.Step) -> None:
        if step.status == "failed":
            say(f"{step.name}: {step.detail}")

    if unit.running:
        say("the running demo had other settings (scenario, time scale): restarting it with these")
    else:
        port = urlsplit(w.dep.endpoint).port or 80
        if await _listening("127.0.0.1", port):  # found now, not as a "port-in-use" failure seconds into a start
            other = free_port_after(port)
            raise ManagerError(f"port {port} on 127.0.0.1 is taken by another program: run the demo on another "
                               + (f"port, e.g. BRINGUP_DEMO_PORT={other} bringup demo" if other is not None else
                                  "port: BRINGUP_DEMO_PORT=<a free port> bringup demo"))
    # the flags are written by the protocol, under the lock: never beside a restart someone else is making
    out = await protocol.run(w, wanted, quiet, wait_ready=False, stop_first=unit.running, purpose="demo")
    if not out.ok:  # refused, superseded, or nothing started: not this console's demo to stop on exit
        raise ManagerError(out.message)
    await w.manager.save_argv("ready", wanted)
    return True


async def _wanted(w: DemoEngine, say: Callable[[str], None]) -> list[str]:
    """The demo's command: the configured one (scenario, time scale, port), with the flag changes made on the last
    demo (`restart demo --set`, the console's flags dialog) replayed on it, as `start` replays them on an edited
    config (ops/config_drift.py), and said. Issue 51: a demo started again ran the configured command, silently
    dropping those flags, and its record said someone had removed them. Flags saved before bringup recorded the
    command they were set over are not kept (their port and time scale may be another demo's), nor are any under a
    `--scenario` asked: a failure to watch runs as it is defined (said, with the flags not kept)."""
    configured = list(w.dep.command) if isinstance(w.dep, ProcessDeployment) else []
    base = await w.manager.read_saved_argv(BASE)
    if base is None:
        return configured
    saved = await w.argv()
    drift = reconcile(configured, base, saved, w.flag_specs)
    wanted = list(drift.run) if drift is not None else saved
    kept = shown_diff(configured, wanted, w.flag_specs)
    if kept and "--scenario" in configured:
        # a scenario asked is a failure to watch, as it is defined: a flag kept from the last demo (graphs off)
        # could defeat it, and the demo then reached ready with no word of why (issue 51)
        scenario = configured[configured.index("--scenario") + 1] if configured[-1] != "--scenario" else ""
        say(f"not keeping the flags set on the last demo ({', '.join(kept)}): --scenario {scenario} runs as it is "
            "defined (`bringup restart demo --set NAME=VALUE` sets one again)")
        return configured
    if kept:
        say("keeping the flags set on the last demo: " + ", ".join(kept) + " (`bringup restart demo --unset NAME` "
            "drops one)")
    return wanted


#: how many ports after a taken one the demo tries before it suggests one
PORT_TRIES = 20


def free_port_after(port: int, tries: int = PORT_TRIES) -> int | None:
    """The first of the next `tries` ports that can be bound on 127.0.0.1 now, or None. Checked, not guessed: the
    port after a taken one is often taken too (a second demo, a neighbour's server), and advice that fails the
    same way sends the user round in circles. Without SO_REUSEADDR, so a port in TIME_WAIT counts as taken: the
    suggestion errs towards a port that is surely free."""
    for candidate in range(port + 1, min(port + 1 + tries, 65536)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    return None


async def _listening(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


async def stop_demo(w: EngineView) -> None:
    w.action("stop")
    await w.manager.stop()
