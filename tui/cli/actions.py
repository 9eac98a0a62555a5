"""The commands that change a deployment: `start`, `restart` and `stop`, each one run of the safe restart protocol
(`tui.ops.restart`), its steps printed as they happen.

Every one refuses in read-only mode and, interrupted, says in one line what it did and what it left, since a
half-done restart is the one thing an operator must not have to guess. `restart` and `stop` take a running server
down, and follow one rule for that: at a terminal they ask first (`--yes` does not ask); with no terminal to ask on
(a script, `ssh host bringup stop k26`, cron) the command line is the instruction and they act. A restart whose
`--set`/`--unset` change nothing is refused (`--force` restarts anyway), and a failed one names the last flags that
reached ready and how to go back to them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import sys
from collections.abc import Callable
from typing import Any

from tui.config.deployments import DeploymentConfig
from tui.config.settings import Settings
from tui.exit_codes import ExitCode
from tui.guard.redact import BOOK
from tui.lifecycle.secrets import redact_argv, redact_flags
from tui.managers import ManagerError
from tui.model import Outcome, Result, Step, StepStatus
from tui.ops.change import ChangeRefused, LastReady, last_ready, plan_change
from tui.ops.outcome import exit_code, stop_exit_code
from tui.transport import TransportError

from .args import UsageError
from .follow_eta import FollowEta
from .report import error, out, print_failure

#: a step's status as a short mark in its text line
_MARKS = {StepStatus.DONE: "ok ", StepStatus.RUNNING: "...", StepStatus.FAILED: "ERR", StepStatus.SKIPPED: " - "}


def _confirmed(question: str, yes: bool) -> bool:
    """The operator's yes, for an action that takes a running server down (`restart`, `stop`): asked at a terminal
    unless `--yes`; with no terminal there is no one to ask, and the command line itself is the instruction."""
    if yes or not sys.stdin.isatty():
        return True
    print(question + " [y/N] ", end="", file=sys.stderr, flush=True)  # stdout is the output's (JSON with --json)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def print_step(as_json: bool, eta: FollowEta | None = None) -> Callable[[Step], None]:
    """An `on_step` for the protocol: each step a line (text or JSON) as it happens; a follow step's phase with
    its ETA (`eta`: follow_eta.py), as `wait` gives it."""
    def show(step: Step) -> None:
        known = eta.of(step) if eta is not None else None
        if as_json:
            print(json.dumps({"step": step.name, "status": step.status, "detail": step.detail, "at": step.at,
                              **(eta.fields(known) if eta is not None else {})}), flush=True)
        else:
            after = eta.words(known) if eta is not None else ""
            print(f"  [{_MARKS[step.status]}] {step.name:<8} {step.detail}{after}", flush=True)
    return show


def with_release_grace(dep: DeploymentConfig, args: argparse.Namespace,
                       **more: Any) -> DeploymentConfig:
    """The deployment as this command runs it: `--unverified-release-grace` (the risk of starting without GPU
    readings, accepted for this command only) over the config's unverified_release_grace_s, and `more` settings."""
    grace = getattr(args, "unverified_release_grace", None)
    if grace is not None:
        more["unverified_release_grace_s"] = grace
    return dep.model_copy(update=more) if more else dep


def _interrupted(name: str, steps: list[Step], as_json: bool) -> ExitCode:
    """Ctrl-C in the middle of an action: one line of what was done and what was not, no traceback."""
    left = next((s.detail for s in reversed(steps) if s.name == "interrupted"), "nothing changed")
    if as_json:
        print(json.dumps({"ok": False, "interrupted": True, "left": left, "error": f"interrupted: {left}",
                          "code": int(ExitCode.INTERRUPTED)}), flush=True)
    print(f"bringup: {name}: interrupted: {left}", file=sys.stderr, flush=True)
    return ExitCode.INTERRUPTED


async def cmd_start(settings: Settings, args: argparse.Namespace) -> int:
    return await _protocol(settings, args, restart=False)


async def cmd_restart(settings: Settings, args: argparse.Namespace) -> int:
    return await _protocol(settings, args, restart=True)


async def _protocol(settings: Settings, args: argparse.Namespace, *, restart: bool) -> int:
    from tui.engine import Engine
    from tui.engine.settle import running_release
    from tui.ops import restart as protocol

    if settings.read_only:
        raise UsageError("read-only mode: restarts and flag changes are disabled (--read-only, read_only in the config "
                         "or BRINGUP_READ_ONLY)")
    name, dep = settings.deployment(args.deployment)
    w = Engine(settings, name, dep)
    try:
        if not w.manager.can_control:
            raise UsageError(f"{name} is observe-only (manager = 'none'): bringup cannot start or restart it")
        # the risk of no GPU readings accepted for this command (a grace, or --without-gpu-evidence) counts
        # before the plan: a restart whose release wait has no readings to go on is refused before it is asked
        # about (a start, when it would start: under the lock, by the protocol)
        w.dep = with_release_grace(dep, args)
        for item in getattr(args, "sets", None) or []:  # a secret typed here: hidden even in a refusal repeating it
            BOOK.learn_set(item)
        without_evidence = bool(getattr(args, "without_gpu_evidence", False))
        if getattr(args, "sets", None):  # validated against the running server's release, not the newest known
            await running_release(w)
        plan = await plan_change(w, getattr(args, "sets", []), getattr(args, "unsets", []),
                                 force=getattr(args, "force", False), gpus=w if restart else None,
                                 without_gpu_evidence=without_evidence)
        if isinstance(plan, ChangeRefused):
            raise UsageError(plan.message)
        for argv in (plan.old, plan.new):  # the old value too, which the operator never typed: hidden in all output
            BOOK.learn_argv(argv)
        for why in plan.noops:
            print(f"bringup: note: {why}, as asked", file=sys.stderr)
        await w.start()
        unit = await w.poll_unit()
        if not restart and unit.running:
            msg = f"{name} is already running (pid {unit.main_pid})"
            out({"ok": True, "phase": str(w.state.phase), "message": msg, "invocation": unit.invocation,
                 "code": int(ExitCode.OK)}, args.json, msg)
            return ExitCode.OK
        for line in plan.drift:  # said before acting: the config's edit is what runs, not the saved flags
            print(f"bringup: note: {line}", file=sys.stderr)
        if restart and not _confirmed(f"Restart {name} on {w.host_name} ({w.manager.target}) with "
                                      f"{plan.describe()}?", args.yes):
            return error("cancelled; nothing changed", ExitCode.USAGE, args.json)
        print(f"{'restarting' if restart else 'starting'} {name} on {w.host_name}" +
              (f": {plan.change}" if plan.change else ""), file=sys.stderr if args.json else sys.stdout)
        steps: list[Step] = []
        show = print_step(args.json, FollowEta(lambda phase, at: w.history.on_entry(name, w.state, phase, at),
                                               lambda: w.state))

        def step(s: Step) -> None:
            steps.append(s)
            if s.name != "interrupted":
                show(s)
        try:
            # the plan names the flags it was computed (and perhaps confirmed) from: if another operator changed
            # them since, the protocol does nothing, since writing ours would silently undo theirs
            outcome = await protocol.run(w, plan, step, wait_ready=not args.no_wait,
                                         stop_first=restart, purpose="restart" if restart else "start",
                                         rollback=getattr(args, "rollback", False) or None,
                                         ready_timeout_s=args.timeout or None,
                                         without_gpu_evidence=without_evidence)
        except asyncio.CancelledError:
            return _interrupted(name, steps, args.json)
        failure = w.named(outcome.failure)
        if failure is not None and not args.json:
            print_failure(failure)
        code = exit_code(outcome)
        d: dict[str, Any] = {"ok": outcome.ok, "phase": str(outcome.phase), "message": outcome.message,
                             "invocation": outcome.invocation, "failure": failure.as_dict() if failure else None,
                             "rolled_back": outcome.result is Result.ROLLED_BACK, "code": int(code)}
        text = [f"{name}: {outcome.message}"]
        release = next((s.detail for s in reversed(steps) if s.name == "release"), "")
        if release:
            d["release"] = release
        if not outcome.ok:
            d["error"] = outcome.message
        if outcome.result in RAN_AND_FAILED:
            good: LastReady | None = None
            with contextlib.suppress(ManagerError, TransportError):
                good = await last_ready(w, plan.new)
            d["last_ready"], more = _last_ready(name, good, outcome,
                                                rollback_asked=bool(getattr(args, "rollback", False)))
            text += more
        out(d, args.json, "\n".join(text))
        return code
    finally:
        await w.close()


#: a run of ours that failed or never became ready (not a refusal, nor another's run): the results where the
#: operator needs to know what to go back to
RAN_AND_FAILED = frozenset({Result.FAILED, Result.ROLLED_BACK, Result.TIMED_OUT})


def _flag_words(values: dict[str, str | None]) -> str:
    """The flags as shell words, each secret's value `***`: redacted before quoting, since a value quoted first
    (`'sk-pa'"'"'ss'` for one with a quote) is no longer the value the redactor looks for."""
    return " ".join(f"--{k}" + ("" if v is None else f" {shlex.quote(v)}") for k, v in redact_flags(values).items()) \
        or "(none of the flags bringup knows)"


def _last_ready(name: str, good: LastReady | None, outcome: Outcome, *, rollback_asked: bool) -> \
        tuple[dict[str, Any] | None, list[str]]:
    """The last flags that reached ready (`save_argv("ready")` of the restart protocol) and how to go back to them,
    for a restart or start that failed: as JSON, and as the lines that end the text output."""
    if good is None:
        return None, [f"no flags of {name} have reached ready under bringup yet, so there is nothing to roll back to "
                      "(--rollback goes back to the last ones that did, once some have)"]
    rolled_back = outcome.result is Result.ROLLED_BACK
    back = "" if rolled_back else good.command
    d: dict[str, Any] = {"argv": redact_argv(good.argv), "flags": redact_flags(good.flags), "command": back or None}
    lines = [f"last flags that reached ready: {_flag_words(good.flags)}"]
    if rolled_back:
        lines.append("--rollback went back to them (see its result above)")
    elif good.same:
        lines.append("these are the flags that just failed: the cause is not a flag change (read the excerpt); "
                     "--rollback would have nothing to go back to")
    else:
        lines.append(f"to go back to them: {back}" if back else
                     f"to go back to them: write them back by hand (other arguments differ too, or a secret's value, "
                     f"which is never printed): {shlex.join(redact_argv(good.argv))}")
        if rollback_asked and outcome.result is Result.TIMED_OUT:
            lines.append("--rollback goes back after a failure, not after a timeout (the run may still come up)")
        elif not rollback_asked:
            lines.append("or restart with --rollback: on a failure it goes back to them by itself")
    return d, lines


async def cmd_stop(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Engine
    from tui.ops import restart as protocol

    if settings.read_only:
        raise UsageError("read-only mode: start/stop is disabled")
    name, dep = settings.deployment(args.deployment)
    w = Engine(settings, name, dep)
    w.dep = with_release_grace(dep, args)
    steps: list[Step] = []
    try:
        # the same rule as restart's: asked at a terminal (and only when there is a run to stop)
        if sys.stdin.isatty() and not getattr(args, "yes", False):
            unit = await w.poll_unit()
            if unit.running and not _confirmed(f"Stop {name} on {w.host_name} ({w.manager.target}, pid "
                                               f"{unit.main_pid})?", False):
                return error("cancelled; nothing changed", ExitCode.USAGE, args.json)
        try:
            # under the lock, and stopped means the GPUs are free again: `bringup stop && bringup start` must not
            # start into the old run's memory (the seeds' fixed `sleep 8` did, and every config of a sweep failed)
            o = await protocol.stop(w, steps.append)
        except asyncio.CancelledError:
            return _interrupted(name, steps, args.json)
        release = next((s.detail for s in reversed(steps) if s.name == "release"), "")
        code = stop_exit_code(o)
        d: dict[str, Any] = {"ok": o.ok, "phase": "stopped" if o.ok else str(o.phase), "message": o.message,
                             "code": int(code)}
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
            print(f"bringup: {name}: {o.message}", file=sys.stderr)
            if args.json:
                out(d, True, "")
        return code
    finally:
        await w.close()
