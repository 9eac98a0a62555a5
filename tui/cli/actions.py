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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tui.config import DeploymentConfig, Settings
from tui.exit_codes import ExitCode
from tui.lifecycle.flags import unknown_flag
from tui.lifecycle.presets import FlagSpec
from tui.managers import ManagerError
from tui.model import Outcome, Step
from tui.transport import TransportError

from .args import UsageError
from .report import error, out, print_failure

if TYPE_CHECKING:
    from tui.engine import Engine

#: a step's status as a short mark in its text line
_MARKS = {"done": "ok ", "running": "...", "failed": "ERR", "skipped": " - "}


def _confirmed(question: str, yes: bool) -> bool:
    """The operator's yes, for an action that takes a running server down (`restart`, `stop`): asked at a terminal
    unless `--yes`; with no terminal there is no one to ask, and the command line itself is the instruction."""
    if yes or not sys.stdin.isatty():
        return True
    print(question + " [y/N] ", end="", file=sys.stderr, flush=True)  # stdout is the output's (JSON with --json)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _spec_names(specs: Sequence[FlagSpec]) -> dict[str, FlagSpec]:
    return {n: f for f in specs for n in (f.name, *f.aliases)}


def _check_flag_names(name: str, items: Sequence[str], specs: Sequence[FlagSpec],
                      every: Sequence[FlagSpec] = (), release: str = "") -> None:
    """An unknown flag is refused, never written: bringup cannot tell a switch from an option that takes a value
    without its spec, and a server given an option it does not know exits at once (the running one already
    stopped). A close known name is suggested (`tpsize` -> `tp-size`), as for a deployment's name. A flag of
    another release (`every`) is named as such: SGLang 0.5.21 removed `--cuda-graph-max-bs`."""
    known = _spec_names(specs)
    others = _spec_names(every)
    for item in items:
        flag = item.partition("=")[0].strip().lstrip("-")
        if flag not in known and flag in others:
            raise UsageError(f"--{flag} is not a flag of {release}: the server would refuse its command line; "
                             f"`bringup flags {name}` lists the flags it takes")
        if flag not in known:
            raise UsageError(unknown_flag(flag, list(known), f"bringup flags {name}"))


def _contradictions(sets: Sequence[str], unsets: Sequence[str], specs: Sequence[FlagSpec]) -> str:
    """Two requests for the same flag that cannot both be done (`--set tp-size=4 --unset tp-size`, or two
    values): the first such pair in words, or ""."""
    from tui.lifecycle.flags import parse_changes

    known = _spec_names(specs)
    asked: dict[str, tuple[str, Any]] = {}
    for opt, items in (("--set", sets), ("--unset", unsets)):
        for item in items:
            spec = known[item.partition("=")[0].strip().lstrip("-")]
            ch = parse_changes([item], [], specs)[0] if opt == "--set" else parse_changes([], [item], specs)[0]
            said = f"{opt} {item}"
            if spec.name in asked and asked[spec.name][1] != ch:
                return f"{asked[spec.name][0]} and {said} contradict: give one of them"
            asked.setdefault(spec.name, (said, ch))
    return ""


def _nothing_to_change(sets: Sequence[str], unsets: Sequence[str], old: Sequence[str],
                       specs: Sequence[FlagSpec]) -> list[str]:
    """For each requested change that leaves the flags' values as they are, why (`--unset X`: not set)."""
    from tui.lifecycle.flags import apply_changes, current_values, parse_changes

    now = current_values(old, specs)
    why = []
    for item, is_set in [*((x, True) for x in sets), *((x, False) for x in unsets)]:
        ch = (parse_changes([item], [], specs) if is_set else parse_changes([], [item], specs))[0]
        if current_values(apply_changes(old, [ch], specs), specs) == now:
            why.append(f"--{ch.name} is not set" if ch.remove else
                       f"--{ch.name} is already " + ("on" if ch.value is None else repr(now.get(ch.name))))
    return why


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
    """The exit status of a restart's or stop's outcome. Refused after a wait (refused and timed out: no GPU
    readings showed the old run's memory released within release_timeout_s, so nothing was started) is a timeout,
    3, like memory read and still held: told apart from a refusal at once (2, nothing done), since fixing the
    readings, or waiting, may let it through."""
    if outcome.ok:
        return ExitCode.OK
    if outcome.superseded:
        return ExitCode.SUPERSEDED
    if outcome.timed_out:
        return ExitCode.TIMEOUT
    return ExitCode.USAGE if outcome.refused else ExitCode.FAILED


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
    from tui.lifecycle.flags import apply_changes, current_values, diff, parse_changes
    from tui.ops import restart as protocol

    if settings.read_only:
        raise UsageError("read-only mode: restarts and flag changes are disabled (--read-only, read_only in the config "
                         "or BRINGUP_READ_ONLY)")
    name, dep = settings.deployment(args.deployment)
    sets, unsets = getattr(args, "sets", []), getattr(args, "unsets", [])
    w = Engine(settings, name, dep)
    try:
        if not w.manager.can_control:
            raise UsageError(f"{name} is observe-only (manager = 'none'): bringup cannot start or restart it")
        # set: the release's own flags (the newest's until the run says which it is); unset: any flag bringup knows
        _check_flag_names(name, sets, w.offered_flags, w.flag_specs, w.release_words())
        _check_flag_names(name, unsets, w.flag_specs)
        changes = parse_changes(sets, [], w.offered_flags) + parse_changes([], unsets, w.flag_specs)
        contradiction = _contradictions(sets, unsets, w.flag_specs)
        if contradiction:  # no --force for this: which of the two is meant is the operator's to say
            raise UsageError(contradiction)
        old = await w.argv()
        new = apply_changes(old, changes, w.flag_specs)
        noops = _nothing_to_change(sets, unsets, old, w.flag_specs)
        changed = current_values(new, w.flag_specs) != current_values(old, w.flag_specs)
        if changes and not changed and not getattr(args, "force", False):
            raise UsageError(f"nothing to change: {'; '.join(noops)}; restarting would change no flag (--force "
                             "restarts anyway)")
        for why in noops if changed else ():
            print(f"bringup: note: {why}, as asked", file=sys.stderr)
        await w.start()
        unit = await w.poll_unit()
        if not restart and unit.running:
            msg = f"{name} is already running (pid {unit.main_pid})"
            out({"ok": True, "phase": str(w.state.phase), "message": msg, "invocation": unit.invocation,
                 "code": int(ExitCode.OK)}, args.json, msg)
            return ExitCode.OK
        change_txt = diff(old, new, w.flag_specs)
        what = "; ".join(change_txt) or "no flag change"
        if restart and not _confirmed(f"Restart {name} on {w.host_name} ({w.manager.target}) with {what}?",
                                      args.yes):
            return error("cancelled; nothing changed", ExitCode.USAGE, args.json)
        w.dep = with_release_grace(dep, args, **({"ready_timeout_s": args.timeout} if args.timeout else {}))
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
        code = exit_code(outcome)
        d: dict[str, Any] = {"ok": outcome.ok, "phase": str(outcome.phase), "message": outcome.message,
                             "invocation": outcome.invocation, "failure": failure.as_dict() if failure else None,
                             "rolled_back": outcome.rolled_back, "code": int(code)}
        text = [f"{name}: {outcome.message}"]
        release = next((s.detail for s in reversed(steps) if s.name == "release"), "")
        if release:
            d["release"] = release
        if not outcome.ok:
            d["error"] = outcome.message
        if _ran_and_failed(outcome):
            d["last_ready"], more = await _last_ready(w, new, outcome,
                                                      rollback_asked=bool(getattr(args, "rollback", False)))
            text += more
        out(d, args.json, "\n".join(text))
        return code
    finally:
        await w.close()


def _ran_and_failed(outcome: Outcome) -> bool:
    """A run of ours that failed or never became ready (not a refusal, nor another's run): the one case where the
    operator needs to know what to go back to."""
    return not outcome.ok and not outcome.refused and not outcome.superseded


def _flag_words(values: dict[str, str | None]) -> str:
    return " ".join(f"--{k}" + ("" if v is None else f" {shlex.quote(v)}") for k, v in values.items()) or \
        "(none of the flags bringup knows)"


def _others(argv: Sequence[str], specs: Sequence[FlagSpec]) -> list[str]:
    """The arguments no flag spec covers (the program, the model, the port...)."""
    from tui.lifecycle.flags import remove_flag

    rest = list(argv)
    for spec in specs:
        rest = remove_flag(rest, spec)
    return rest


def _back_to(name: str, failed: Sequence[str], good: Sequence[str], specs: Sequence[FlagSpec]) -> str:
    """The `bringup restart` that goes from the failed flags back to the good ones, or "" when --set/--unset cannot
    say it (other arguments differ, or a saved value this bringup would not write)."""
    from tui.lifecycle.flags import apply_changes, current_values, parse_changes

    now, then = current_values(failed, specs), current_values(good, specs)
    unsets = [flag for flag in now if flag not in then]
    sets = [flag if value is None else f"{flag}={value}" for flag, value in then.items()
            if flag not in now or now[flag] != value]
    if not (sets or unsets) or _others(failed, specs) != _others(good, specs):
        return ""
    try:
        if current_values(apply_changes(failed, parse_changes(sets, unsets, specs), specs), specs) != then:
            return ""
    except ValueError:  # FlagValueError
        return ""
    words = [w for flag in unsets for w in ("--unset", flag)] + [w for item in sets for w in ("--set", item)]
    return shlex.join(["bringup", "restart", name, *words, "--yes"])


async def _last_ready(w: Engine, failed: Sequence[str], outcome: Outcome, *, rollback_asked: bool) -> \
        tuple[dict[str, Any] | None, list[str]]:
    """The last flags that reached ready (`save_argv("ready")` of the restart protocol) and how to go back to them,
    for a restart or start that failed: as JSON, and as the lines that end the text output."""
    from tui.lifecycle.flags import current_values

    good: list[str] | None = None
    with contextlib.suppress(ManagerError, TransportError):
        good = await w.manager.read_saved_argv("ready")
    name = w.name
    if good is None:
        return None, [f"no flags of {name} have reached ready under bringup yet, so there is nothing to roll back to "
                      "(--rollback goes back to the last ones that did, once some have)"]
    flags = current_values(good, w.flag_specs)
    back = "" if outcome.rolled_back else _back_to(name, failed, good, w.flag_specs)
    d = {"argv": list(good), "flags": flags, "command": back or None}
    lines = [f"last flags that reached ready: {_flag_words(flags)}"]
    if outcome.rolled_back:
        lines.append("--rollback went back to them (see its result above)")
    elif list(good) == list(failed):
        lines.append("these are the flags that just failed: the cause is not a flag change (read the excerpt); "
                     "--rollback would have nothing to go back to")
    else:
        lines.append(f"to go back to them: {back}" if back else
                     f"to go back to them: write them back by hand (other arguments differ too): {shlex.join(good)}")
        if rollback_asked and outcome.timed_out:
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
        # a stop that did not finish in time failed: there is no "ready" to go on waiting for; one that stopped but
        # had no GPU readings to show the memory free (refused after its wait) is 3, as a restart's is
        code = ExitCode.FAILED if o.timed_out and not o.refused else exit_code(o)
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
