"""The commands that change a deployment: `start`, `restart` and `stop`, each one run of the safe restart protocol
(`tui.ops.restart`), its steps printed as they happen.

Every one refuses in read-only mode, asks before a restart unless `--yes`, and, interrupted, says in one line what
it did and what it left, since a half-done restart is the one thing an operator must not have to guess.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

from tui.config import Settings
from tui.exit_codes import ExitCode
from tui.model import Outcome, Step

from .args import UsageError
from .report import out, print_failure

#: a step's status as a short mark in its text line
_MARKS = {"done": "ok ", "running": "...", "failed": "ERR", "skipped": " - "}


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        raise UsageError("refusing to act without confirmation: no terminal to ask on; pass --yes")
    try:
        return input(question + " [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def print_step(as_json: bool) -> Callable[[Step], None]:
    """An `on_step` for the protocol: each step a line (text or JSON) as it happens."""
    def show(step: Step) -> None:
        if as_json:
            print(json.dumps({"step": step.name, "status": step.status, "detail": step.detail, "at": step.at}),
                  flush=True)
        else:
            print(f"  [{_MARKS.get(step.status, '   ')}] {step.name:<8} {step.detail}", flush=True)
    return show


def exit_code(outcome: Outcome) -> ExitCode:
    if outcome.ok:
        return ExitCode.OK
    if outcome.superseded:
        return ExitCode.SUPERSEDED
    return ExitCode.USAGE if outcome.refused else ExitCode.TIMEOUT if outcome.timed_out else ExitCode.FAILED


def _interrupted(name: str, steps: list[Step], as_json: bool) -> ExitCode:
    """Ctrl-C in the middle of an action: one line of what was done and what was not, no traceback."""
    left = next((s.detail for s in reversed(steps) if s.name == "interrupted"), "nothing changed")
    if as_json:
        print(json.dumps({"ok": False, "interrupted": True, "left": left}), flush=True)
    print(f"bringup: {name}: interrupted: {left}", file=sys.stderr, flush=True)
    return ExitCode.INTERRUPTED


async def cmd_start(settings: Settings, args: argparse.Namespace) -> int:
    return await _protocol(settings, args, restart=False)


async def cmd_restart(settings: Settings, args: argparse.Namespace) -> int:
    return await _protocol(settings, args, restart=True)


async def _protocol(settings: Settings, args: argparse.Namespace, *, restart: bool) -> int:
    from tui.engine import Engine
    from tui.lifecycle.flags import apply_changes, diff, parse_changes
    from tui.ops import restart as protocol

    if settings.read_only:
        raise UsageError("read-only mode: restarts and flag changes are disabled (--read-only, read_only in the config "
                         "or BRINGUP_READ_ONLY)")
    name, dep = settings.deployment(args.deployment)
    w = Engine(settings, name, dep)
    try:
        if not w.manager.can_control:
            raise UsageError(f"{name} is observe-only (manager = 'none'): bringup cannot start or restart it")
        changes = parse_changes(getattr(args, "sets", []), getattr(args, "unsets", []), w.flag_specs)
        old = await w.argv()
        new = apply_changes(old, changes, w.flag_specs)
        await w.start()
        unit = await w.poll_unit()
        if not restart and unit.running:
            print(f"{name} is already running (pid {unit.main_pid})")
            return ExitCode.OK
        change_txt = diff(old, new, w.flag_specs)
        if restart and not args.yes:
            what = "; ".join(change_txt) or "no flag change"
            if not _ask(f"Restart {name} on {w.host_name} ({w.manager.target}) with {what}?"):
                print("cancelled; nothing changed")
                return ExitCode.USAGE
        if args.timeout:
            w.dep = dep.model_copy(update={"ready_timeout_s": args.timeout})
        print(f"{'restarting' if restart else 'starting'} {name} on {w.host_name}" +
              (f": {'; '.join(change_txt)}" if change_txt else ""), file=sys.stderr if args.json else sys.stdout)
        steps: list[Step] = []
        show = print_step(args.json)

        def step(s: Step) -> None:
            steps.append(s)
            if s.name != "interrupted":
                show(s)
        try:
            # expect_argv: the change was computed (and perhaps confirmed) from these flags; if another operator
            # changed them since, writing ours would silently undo theirs
            outcome = await protocol.run(w, new, step, wait_ready=not args.no_wait,
                                         stop_first=restart, purpose="restart" if restart else "start",
                                         rollback=getattr(args, "rollback", False) or None, expect_argv=old)
        except asyncio.CancelledError:
            return _interrupted(name, steps, args.json)
        failure = w.named(outcome.failure)
        if failure is not None and not args.json:
            print_failure(failure)
        out({"ok": outcome.ok, "phase": str(outcome.phase), "message": outcome.message,
             "invocation": outcome.invocation, "failure": failure.as_dict() if failure else None,
             "rolled_back": outcome.rolled_back}, args.json, f"{name}: {outcome.message}")
        return exit_code(outcome)
    finally:
        await w.close()


async def cmd_stop(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Engine
    from tui.ops import restart as protocol

    if settings.read_only:
        raise UsageError("read-only mode: start/stop is disabled")
    name, dep = settings.deployment(args.deployment)
    w = Engine(settings, name, dep)
    steps: list[Step] = []
    try:
        try:
            # under the lock, and stopped means the GPUs are free again: `bringup stop && bringup start` must not
            # start into the old run's memory (the seeds' fixed `sleep 8` did, and every config of a sweep failed)
            o = await protocol.stop(w, steps.append)
        except asyncio.CancelledError:
            return _interrupted(name, steps, args.json)
        release = next((s.detail for s in reversed(steps) if s.name == "release"), "")
        d: dict[str, Any] = {"ok": o.ok, "phase": "stopped" if o.ok else str(o.phase), "message": o.message}
        if o.stop_s is not None:
            d["stop_s"] = o.stop_s
        if release:
            d["release"] = release
        if o.ok and o.message == "not running":
            out(d, args.json, f"{name} is not running")
        elif o.ok:
            out(d, args.json, f"{name} {o.message}")
        else:
            d["error"] = o.message
            if args.json:
                out(d, True, "")
            else:
                print(f"bringup: {name}: {o.message}", file=sys.stderr)
        # a stop that did not finish in time failed: there is no "ready" to go on waiting for
        return exit_code(o) if not o.timed_out else ExitCode.FAILED
    finally:
        await w.close()
