"""The `bringup` command line: the console by default, and headless subcommands for scripts.

Exit codes are `tui.exit_codes.ExitCode`: 0 success/ready, 1 failed, 2 usage or config error or refused (nothing
was done), 3 timed out, 4 stopped (`wait`: nothing is starting), 5 superseded, 130 interrupted. Every headless
subcommand takes `--json` (`demo` with `--headless`). Errors are one line on stderr, never a traceback; with
`--json` also exactly one object on stdout, `{"error": "...", "code": N}` (usage errors of the command line too).

The package: `args` (the grammar), `report` (what is printed), `follow` (`wait` and the headless demo; `fleet` for
several deployments; `wait_lines` prints a wait's events for both), `actions` (start, restart, stop), `commands`
(status, flags, replay, bench); this module runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import gc
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tui.config.demo import DEMO
from tui.config.parts import ConfigError
from tui.config.settings import Settings, load
from tui.errors import PermanentError
from tui.exit_codes import ExitCode
from tui.guard.files import UnsafeLocation, check_own_dir
from tui.guard.redact import ScrubbingWriter, learn_environment
from tui.lifecycle.presets import FlagValueError
from tui.managers import ManagerError
from tui.managers.registry import local_state_dirs
from tui.ops.wait import STOPPED_GRACE_S
from tui.transport import TransportError
from tui.transport.local import KILL_WAIT_S, LIVE_GROUPS, kill_all_children

from .actions import cmd_restart, cmd_start, cmd_stop
from .args import DEPLOYMENT_HELP, EPILOG, FLAG_NAMES, ArgumentsError, UsageError, build_parser
from .commands import cmd_bench, cmd_flags, cmd_replay, cmd_status
from .config_trust import config_trust_warning
from .exporter import cmd_exporter
from .follow import cmd_demo, cmd_wait
from .record import cmd_record
from .report import error, fmt_s, gpus_dict, out, render_status, snapshot_dict
from .serve import cmd_serve
from .sweep import cmd_sweep

__all__ = [
    "DEPLOYMENT_HELP", "EPILOG", "FLAG_NAMES", "STOPPED_GRACE_S",
    "ExitCode", "UsageError", "build_parser", "fmt_s", "gpus_dict", "main", "out", "render_status", "run_async",
    "snapshot_dict",
]

#: the headless commands run on an event loop, each with the loaded settings and its arguments
HANDLERS: dict[str, Callable[[Settings, argparse.Namespace], Awaitable[int]]] = {
    "status": cmd_status, "wait": cmd_wait, "start": cmd_start, "restart": cmd_restart, "stop": cmd_stop,
    "flags": cmd_flags, "demo": cmd_demo, "bench": cmd_bench, "sweep": cmd_sweep, "exporter": cmd_exporter,
    "serve": cmd_serve, "record": cmd_record,
}


def _need_terminal(what: str) -> None:
    """The console reads keys from stdin and draws on stderr: without a terminal on both it would wait for keys
    that never come (a script that forgot its subcommand would hang, with a demo server started behind it)."""
    if os.environ.get("TEXTUAL_DRIVER"):  # a driver of its own (textual-serve's web driver): no terminal needed
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        hint = "bringup demo --headless" if what == "demo" else "bringup status | wait | restart"
        raise UsageError(f"the {what} needs a terminal (stdin and stderr are not one here); for scripts: {hint}")


def run_console(settings: Settings, deployment: str | list[str] | None, read_only: bool, only: bool = False) -> int:
    """One deployment named: its console; several: the overview of those; none: the only one, or all. `only`: the
    console shows the named deployments and no other (`bringup serve`'s sessions)."""
    from tui.console.run import run_app

    names = [deployment] if isinstance(deployment, str) else list(deployment or [])
    if only and not names:
        raise UsageError("console --only: name the deployments it may show")
    scope = [settings.deployment(n)[0] for n in names] if only else None
    if len(names) > 1:
        return run_app(settings, None, read_only=read_only, fleet=[settings.deployment(n)[0] for n in names],
                       only=scope)
    return run_app(settings, names[0] if names else None, read_only=read_only, only=scope)


def run_async(coro: Any) -> Any:
    """asyncio.run, but an exit that never hangs: tasks left over are cancelled and given 3 s, not forever."""
    loop = asyncio.new_event_loop()
    main_task = loop.create_task(coro)
    # Ctrl-C cancels the command's task, so it unwinds like any cancellation: locks released, the steps done
    # said, no traceback (a KeyboardInterrupt raised wherever the loop happened to be could skip all that)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, main_task.cancel)
    try:
        try:
            return loop.run_until_complete(main_task)
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
    finally:
        # each stage on its own: one that runs out of time (a generator's close still reaping its command) must not
        # skip the next, least of all the wait for the commands' reaping, without which asyncio prints
        # "Unknown child process pid N" on the user's terminal
        try:
            with contextlib.suppress(TimeoutError, RuntimeError):
                # again until none is left: a task being cancelled may start another (a timer due meanwhile, a
                # cleanup's own command), and one left pending when the loop closes fails after it, with a traceback
                deadline = loop.time() + 3.0
                while (pending := asyncio.all_tasks(loop)) and loop.time() < deadline:
                    for t in pending:
                        t.cancel()
                    loop.run_until_complete(asyncio.wait(pending, timeout=max(0.0, deadline - loop.time())))
            with contextlib.suppress(TimeoutError, RuntimeError):
                loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), 3.0))
            with contextlib.suppress(TimeoutError, RuntimeError):
                # a command whose task was cancelled before it could reap it, or whose reap ran out of time: ended
                # now, and its exit and its transport's close delivered while the loop still runs (after close()
                # they print a traceback)
                if LIVE_GROUPS:
                    procs = list(LIVE_GROUPS.values())
                    kill_all_children()
                    # until the loop's child watcher has reaped them (not a fixed pause): a transport collected
                    # before that reaps its child itself (Popen.poll in its close), and the watcher, finding it
                    # gone, prints "Unknown child process pid N" on the user's terminal. Their exit, not `wait()`,
                    # which also waits for their pipes to close (a grandchild in a session of its own can hold
                    # them open)
                    deadline = loop.time() + KILL_WAIT_S
                    while any(p.returncode is None for p in procs) and loop.time() < deadline:
                        loop.run_until_complete(asyncio.sleep(0.02))
                    del procs  # collected below, while the loop still runs
                gc.collect()
                loop.run_until_complete(asyncio.sleep(0))
        finally:
            loop.close()


def _wants_json(argv: Sequence[str]) -> bool:
    """--json anywhere among the options (before a `--`): known before the command line is parsed, so that even
    argparse's complaint about it comes out as JSON."""
    words = list(argv)
    return "--json" in (words[:words.index("--")] if "--" in words else words)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line run, with every word it prints scrubbed of secrets (tui/guard/redact.py): its stdout and
    stderr are wrapped here, at entry, so that no print or JSON dump of any command can go around the redactor."""
    learn_environment()  # HF_TOKEN, *_KEY, ... of this process: a server started from it may echo them
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ScrubbingWriter(sys.stdout), ScrubbingWriter(sys.stderr)
    try:
        return _main(argv)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        if isinstance(sys.stdout, ScrubbingWriter):  # not the devnull a closed pipe put there
            sys.stdout = streams[0]
        sys.stderr = streams[1]


def _main(argv: Sequence[str] | None = None) -> int:
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a stuck bringup is (the real
    # stream: the scrubbing writer has no descriptor to give)
    with contextlib.suppress(ValueError, AttributeError, OSError):
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__ or sys.stderr, all_threads=True)
    words = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(words)
    try:
        args = build_parser().parse_args(words)
        as_json = bool(getattr(args, "json", False))
        if args.cmd == "replay":
            return cmd_replay(args)
        ro = True if (args.read_only or getattr(args, "demo_read_only", False)
                      or getattr(args, "console_read_only", False)) else None
        # `bringup demo` asks its scenario (none: the plain demo); any other command gets the demo as last brought up
        settings = load(args.config, read_only=ro, scenario=getattr(args, "scenario", None),
                        time_scale=getattr(args, "time_scale", None))
        warning = config_trust_warning(settings.config_file)  # a file another user can write names our commands
        for what, state_dir in local_state_dirs(settings):  # another user's, or one others can write: refused
            check_own_dir(state_dir, what)
        if warning:
            print(f"bringup: {warning}", file=sys.stderr, flush=True)
        if args.cmd in (None, "console", "demo", "serve"):
            from tui.console.run import check_keymap

            check_keymap(settings)  # before anything starts: a demo server, a terminal, a browser
        if args.cmd in (None, "console"):
            _need_terminal("console")
            return run_console(settings, getattr(args, "deployment", None), settings.read_only,
                               getattr(args, "console_only", False))
        if args.cmd == "demo" and not args.headless:
            _need_terminal("demo")
            from tui.console.run import run_app

            return run_app(settings, DEMO, read_only=settings.read_only, demo_keep=args.keep)
        return int(run_async(HANDLERS[args.cmd](settings, args)))
    except ArgumentsError as e:  # argparse's own words, already prefixed with the command
        print(str(e), file=sys.stderr)
        if as_json:
            print(json.dumps({"error": str(e), "code": int(ExitCode.USAGE)}))
        return ExitCode.USAGE
    except (ConfigError, UsageError, FlagValueError) as e:
        return error(str(e), ExitCode.USAGE, as_json)  # one problem a line, each a whole error line
    except (ManagerError, TransportError, UnsafeLocation) as e:
        return error(str(e), ExitCode.USAGE if isinstance(e, PermanentError) else ExitCode.FAILED, as_json)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        if as_json:
            print(json.dumps({"error": "interrupted", "code": int(ExitCode.INTERRUPTED)}))
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `bringup status | head`: the reader has gone; not an error worth a message
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps Python from complaining at exit
        return ExitCode.BROKEN_PIPE
    except Exception as e:  # last resort: one line, not a traceback, unless asked for
        if os.environ.get("BRINGUP_DEBUG"):
            raise
        return error(f"internal error: {type(e).__name__}: {e} (BRINGUP_DEBUG=1 shows the traceback)",
                     ExitCode.FAILED, as_json)
