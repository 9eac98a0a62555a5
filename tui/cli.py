"""The `bringup` command line: the console by default, and headless subcommands for scripts.

Exit codes: 0 success/ready, 1 failed, 2 usage or config error or refused (nothing was done), 3 timed out,
4 stopped (`wait`: nothing is starting), 130 interrupted. Every headless subcommand takes `--json` (`demo` with
`--headless`). Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from tui import __version__
from tui.config import DEMO, DEMO_PORT, ConfigError, Settings, load
from tui.lifecycle.presets import FlagValueError
from tui.managers import ManagerError
from tui.model import GpuSnapshot, Phase, Snapshot
from tui.sim.scenarios import DESCRIPTIONS, SCENARIOS
from tui.transport import TransportError

#: a script can tell "not ready in time" and "nothing is starting" from a config error (2) and a failure (1)
EXIT_TIMEOUT = 3
EXIT_STOPPED = 4
#: the result is not this command's: another run replaced the one it started, or its lock was lost and things
#: changed meanwhile (a sweep must not file it under this config)
EXIT_SUPERSEDED = 5

EPILOG = """\
exit codes: 0 ok/ready, 1 failed, 2 usage/config error, refused or a permanent error (unknown host key, unit not
found), 3 timeout, 4 stopped (wait), 5 superseded (another run replaced the one this command started, or its lock
was lost), 130 interrupted.
config: --config, $BRINGUP_CONFIG, ./config.toml, $XDG_CONFIG_HOME/bringup/config.toml (a `demo` deployment
always exists). Docs: README.md.
"""


FLAG_NAMES = ("flags are named as on the server's command line without the leading `--`, e.g. "
              "`disable-cuda-graph` or `mem-fraction-static=0.85`")
DEPLOYMENT_HELP = "a deployment of the config (default: the only one configured, or `demo` if none is)"
#: a unit seen stopped this long, with no restart or start in progress, is not going to become ready by itself
STOPPED_GRACE_S = 2.0


class UsageError(Exception):
    """Wrong input from the user: message to stderr, exit 2."""


def build_parser() -> argparse.ArgumentParser:
    # --config and --json work before or after the subcommand; in the subcommands they default to "not given"
    # so that they do not overwrite what the main parser read. `console` has no JSON output: no --json there.
    conf = argparse.ArgumentParser(add_help=False)
    conf.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                      help="config file (default: see below)")
    common = argparse.ArgumentParser(add_help=False, parents=[conf])
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")

    p = argparse.ArgumentParser(
        prog="bringup", description="Bring up and operate LLM inference servers (SGLang, vLLM): watch the "
        "lifecycle, GPUs and throughput, and restart with new flags safely.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", metavar="FILE", help="config file (default: see below)")
    p.add_argument("--json", action="store_true", help="machine-readable output (headless commands)")
    p.add_argument("--version", action="version", version=f"bringup {__version__}")
    p.add_argument("--read-only", action="store_true", help="console without restart, start/stop or flag keys")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    def add(name: str, help: str, description: str, json: bool = True) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description, parents=[common if json else conf],
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)

    c0 = add("console", "the console (the default when no command is given)",
             "Open the console on a deployment (the only one configured, or the one named).", json=False)
    c0.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
    c0.add_argument("--read-only", action="store_true", dest="console_read_only",
                    help="console without restart, start/stop or flag keys")

    s = add("status", "phase, timeline, failure, GPUs, throughput and flags, once",
            "Print one snapshot of a deployment: phase with its timeline, the failure (kind, excerpt, hint), "
            "GPU memory, throughput and flags.")
    s.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)

    w = add("wait", "follow until ready (0), failed (1), timeout (3) or stopped (4)",
            "Follow a deployment until it is ready (exit 0), failed (exit 1, with the error excerpt and a hint) "
            "or the timeout passes (exit 3), printing phase changes as they happen. A deployment that is stopped "
            f"(not running for {STOPPED_GRACE_S:g} s, and no restart or start in progress) ends the wait at once "
            "with exit 4. A drop-in for a `systemctl is-active` + `curl` polling loop: "
            "`bringup wait k26 --timeout 1800 && run-benchmarks`.")
    w.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
    w.add_argument("--timeout", type=float, default=1800.0, metavar="S",
                   help="seconds to wait for ready (default 1800)")

    for name, what in (("start", "start"), ("stop", "stop")):
        detail = ("waits for the previous run to release its GPU memory first" if name == "start"
                  else "waits until it has exited and its GPU memory is released, so that a start right after "
                  "it cannot hit a CUDA OOM")
        c = add(name, f"{what} the deployment", f"{what.capitalize()} the deployment's server ({detail}).")
        c.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
        if name == "start":
            c.add_argument("--no-wait", action="store_true", help="return once started, do not wait for ready")
            c.add_argument("--timeout", type=float, default=None, metavar="S",
                           help="seconds to wait for ready (default: the deployment's ready_timeout_s, 1800)")

    r = add("restart", "restart safely, optionally with new flags",
            "Restart with the safe protocol: take the lock, write the flags, stop, wait until the old run's GPU "
            "memory is released, start, and follow the new process until it is ready (a real generation) or "
            f"failed. {FLAG_NAMES[0].upper()}{FLAG_NAMES[1:]} (`bringup flags k26` lists them).\n\n"
            "  bringup restart k26 --set disable-cuda-graph\n"
            "  bringup restart k26 --set speculative-algorithm=DFLASH --unset enable-metrics --yes")
    r.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
    r.add_argument("--set", action="append", default=[], metavar="NAME[=VALUE]", dest="sets",
                   help="add a server flag, or change its value (a switch takes no value); can be repeated")
    r.add_argument("--unset", action="append", default=[], metavar="NAME", dest="unsets",
                   help="remove a server flag from the command line; can be repeated")
    r.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    r.add_argument("--no-wait", action="store_true", help="return once started, do not wait for ready")
    r.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for ready (default: the deployment's ready_timeout_s, 1800)")
    r.add_argument("--rollback", action="store_true", help="on failure, go back to the last flags that were ready")

    f = add("flags", "the flags the preset knows, their values and keys",
            "List the server flags bringup can toggle or set for this deployment, their current values and keys "
            f"(the console's keys). The {FLAG_NAMES}, as `restart --set` and `--unset` take them.")
    f.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)

    rp = add("replay", "run the lifecycle reducer over a recorded log",
             "Replay a recorded log (plain text, journald short format, or `journalctl -o json` lines; - for "
             "stdin) through the same reducer as the console, and print the phase timeline, the final phase and "
             "the failure. A file with no SGLang or vLLM line in it, or a binary file, is refused (exit 2).")
    rp.add_argument("file", metavar="FILE|-", help="the log file, or - to read stdin")
    rp.add_argument("--preset", choices=("sglang", "vllm", "auto"), default="auto",
                    help="which server wrote the log (default auto: told from the log's lines)")

    b = add("bench", "measure tokens/s and TTFT with real streaming requests",
            "Send streaming chat completions to the deployment's OpenAI-compatible endpoint at each concurrency "
            "level and report time to first token, tokens/s per stream and aggregate tokens/s. Only this command "
            "sends load; nothing in bringup benchmarks on its own.\n\n  bringup bench k26 --concurrency 1,4,16")
    b.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
    b.add_argument("--concurrency", default="1,4", metavar="N,N,...", help="levels (default 1,4)")
    b.add_argument("--requests", type=int, default=None, metavar="N",
                   help="requests per level (default 2x level, at least 4)")
    b.add_argument("--prompt-tokens", type=int, default=128, metavar="N",
                   help="prompt length in tokens, about (default 128)")
    b.add_argument("--max-tokens", type=int, default=128, metavar="N",
                   help="tokens to generate per request (default 128)")
    b.add_argument("--timeout", type=float, default=120.0, metavar="S", help="seconds per request (default 120)")

    d = add("demo", "the console on a simulated SGLang deployment (no GPU needed)",
            "Open the console on the built-in simulated SGLang deployment (8 simulated H200s), starting it if "
            f"needed and stopping it on exit. Its server listens on 127.0.0.1:{DEMO_PORT}; set BRINGUP_DEMO_PORT to "
            "use another port.", json=False)
    d.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="with --headless: one JSON object per phase change")
    d.add_argument("--scenario", choices=SCENARIOS, default="", metavar="NAME",
                   help="a failure to watch, from real incidents (the list is below)")
    d.epilog = "scenarios:\n" + "".join(f"  {name:<20} {what}\n" for name, what in DESCRIPTIONS.items()) + \
        "\n" + (d.epilog or "")
    d.add_argument("--keep", action="store_true", help="leave the simulated server running on exit")
    d.add_argument("--time-scale", type=float, default=1.0, metavar="F", help="speed of the simulated bring-up "
                   "(0.2 = five times faster)")
    d.add_argument("--headless", action="store_true", help="print phases instead of opening the console")
    d.add_argument("--read-only", action="store_true", dest="demo_read_only",
                   help="console without restart, start/stop or flag keys")
    return p


# ---------------------------------------------------------------------------- helpers


def out(obj: Any, as_json: bool, text: str) -> None:
    """`--json` output is JSON Lines: one object per line, so a stream of steps or phases and its final record
    read the same way (`jq`, or `json.loads` per line)."""
    if as_json:
        print(json.dumps(obj, default=str))
    else:
        print(text)


def fmt_s(x: float) -> str:
    return f"{x:6.1f}s"


def gpus_dict(g: GpuSnapshot | None) -> Any:
    if g is None:
        return None
    return {"error": g.error or None, "gpus": [
        {"index": x.index, "name": x.name, "mem_used_mib": x.mem_used_mib, "mem_total_mib": x.mem_total_mib,
         "util_pct": x.util_pct, "temp_c": x.temp_c, "power_w": x.power_w, "lost": x.lost} for x in g.gpus],
        "processes": [{"pid": p.pid, "name": p.name, "gpu": p.gpu_index, "used_mib": p.used_mib}
                      for p in g.processes]}


def snapshot_dict(s: Snapshot, flags: dict[str, str | None], now: float) -> dict[str, Any]:
    tl = []
    for i, t in enumerate(s.timeline):
        end = s.timeline[i + 1].at if i + 1 < len(s.timeline) else now
        tl.append({"phase": str(t.phase), "at": t.at, "seconds": round(max(0.0, end - t.at), 2), "line": t.line})
    tp = s.throughput
    return {
        "deployment": s.deployment, "host": s.host, "phase": str(s.phase), "invocation": s.invocation or None,
        "timeline": tl, "failure": s.failure.as_dict() if s.failure else None,
        "stalled_for": s.stalled_for,
        "unit": None if s.unit is None else {"active": s.unit.active, "sub": s.unit.sub, "main_pid": s.unit.main_pid,
                                              "exit_status": s.unit.exit_status},
        "gpus": gpus_dict(s.gpus),
        "throughput": None if tp is None else {"tokens_per_s": tp.tokens_per_s, "source": tp.source,
                                               "running": tp.running, "queued": tp.queued,
                                               "accept_len": tp.accept_len, "accept_rate": tp.accept_rate,
                                               "ttft_s": tp.ttft_s},
        "flags": flags, "argv": list(s.flags), "notes": list(s.notes),
        "attribution": None if s.attribution is None else {
            "current_mib": s.attribution.current_mib, "previous_mib": s.attribution.previous_mib,
            "other_mib": s.attribution.other_mib, "previous_gpus": list(s.attribution.previous_gpus),
            "note": s.attribution.note or None},
    }


def render_status(d: dict[str, Any]) -> str:
    lines = [f"{d['deployment']} on {d['host']}: {d['phase'].upper()}"
             + (f"   (invocation {d['invocation'][:12]})" if d["invocation"] else "")]
    for t in d["timeline"]:
        lines.append(f"  {t['phase']:<14}{t['seconds']:8.1f}s  {t['line'][:90]}")
    if d["stalled_for"]:
        lines.append(f"  STALLED: no progress for {d['stalled_for']:.0f}s")
    f = d["failure"]
    if f:
        lines.append(f"failed in {f['phase']}: {f['kind']}")
        lines.extend("  | " + x for x in f["excerpt"].splitlines()[-25:])
        lines.append(f"hint: {f['hint']}")
    g = d["gpus"]
    if g and g["gpus"]:
        used = sum(x["mem_used_mib"] or 0 for x in g["gpus"]) / 1024
        total = sum(x["mem_total_mib"] or 0 for x in g["gpus"]) / 1024
        lines.append(f"GPUs: {len(g['gpus'])}, {used:.0f}/{total:.0f} GiB used")
    elif g and g["error"]:
        lines.append(f"GPUs: {g['error']}")
    tp = d["throughput"]
    if tp and tp["tokens_per_s"] is not None:
        acc = f", accept length {tp['accept_len']:.2f}" if tp["accept_len"] else ""
        what = "throughput" if d["phase"] == "ready" else "last throughput while it served"
        lines.append(f"{what}: {tp['tokens_per_s']:.1f} tok/s ({tp['source']}){acc}")
    if d["flags"]:
        lines.append("flags: " + " ".join(f"--{k}" + ("" if v is None else f" {v}") for k, v in d["flags"].items()))
    lines.extend(f"note: {n}" for n in d["notes"])
    return "\n".join(lines)


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        raise UsageError("refusing to act without confirmation: no terminal to ask on; pass --yes")
    try:
        return input(question + " [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


# ---------------------------------------------------------------------------- commands


async def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Watch
    from tui.settle import settle

    name, dep = settings.deployment(args.deployment)
    w = Watch(settings, name, dep)
    try:
        await settle(w)
        flags = await w.flag_values()
        d = snapshot_dict(w.snapshot(time.time()), flags, time.time())
    finally:
        await w.close()
    out(d, args.json, render_status(d))
    return 1 if d["phase"] == "failed" else 0


async def _start_in_progress(w: Any) -> bool:
    """Whether a restart, start or stop holds the deployment's lock: the unit looks stopped between its stop and
    its start. Reads the holder's record and checks the holder is alive on the host; never takes the lock (that,
    even for a moment, could refuse a real restart)."""
    try:
        return await w.manager.lock("wait").holder() is not None
    except (ManagerError, TransportError, OSError):
        return True  # cannot tell: keep waiting


def _result(as_json: bool, result: str, s: Any) -> None:
    """The last JSON line of `wait`: how it ended (ready, failed, stopped or timeout), whatever came before."""
    if as_json:
        print(json.dumps({"result": result, "phase": str(s.phase), "invocation": s.invocation}), flush=True)


def _stopped(s: Any) -> bool:
    """Stopped as the unit reports it, not merely not seen yet: only then can `wait` say so and return."""
    return s.phase == Phase.STOPPED and s.unit is not None and not s.unit.running


async def _follow_until(w: Any, timeout: float, as_json: bool, min_invocation: str = "") -> int:
    from tui.engine import STALE_AFTER_S
    deadline = time.monotonic() + timeout
    shown: tuple[Any, ...] = ()
    t_first = None
    stopped_at: float | None = None
    reported = ""
    stalled_said = False
    stalled_since: tuple[Phase, float] | None = None
    while True:
        s = w.state
        if w.permanent_error is not None:  # waiting will not fix an unknown host key or a unit that is not there
            if as_json:
                print(json.dumps({"error": str(w.permanent_error), "collector": "unit", "permanent": True}),
                      flush=True)
            print(f"bringup: {w.name}: {w.permanent_error}", file=sys.stderr, flush=True)
            _result(as_json, "error", s)
            return 2
        # the host cannot be reached, the unit cannot be read, the server listens on another port than the
        # endpoint's: said at once, not after the whole timeout (a rebooting host comes back: the wait goes on)
        unit_err = w.collector_errors.get("unit", "")
        mismatch = w.endpoint_mismatch()
        problem, source = ((f"cannot read its state: {unit_err}", "unit") if unit_err
                           else (mismatch, "probe") if mismatch else ("", ""))
        if not problem and w.unit_seen_at is not None and time.time() - w.unit_seen_at > STALE_AFTER_S:
            problem, source = (f"no news from {w.host_name} for over {STALE_AFTER_S:g} s (a dead link, or a hung "
                               "host?)", "unit")
        if problem and problem != reported:
            if as_json:
                print(json.dumps({"error": problem, "collector": source}), flush=True)
            else:
                print(f"bringup: {w.name}: {problem} (trying again until the timeout)", file=sys.stderr, flush=True)
        reported = problem
        # STALLED, said once a stall, when it has held for a second in one phase (a log being read back passes
        # through stale phases on its way)
        stall = w.stall_note()
        if not stall:
            stalled_since, stalled_said = None, False
        elif stalled_since is None or stalled_since[0] != s.phase:
            stalled_since = (s.phase, time.monotonic())
        elif not stalled_said and time.monotonic() - stalled_since[1] >= 1.0:
            stalled_said = True
            if as_json:
                print(json.dumps({"stalled_for": round(s.stalled_for or 0.0, 1), "phase": str(s.phase)}), flush=True)
            else:
                print(f"bringup: {w.name}: {stall}", file=sys.stderr, flush=True)
        fresh = not min_invocation or (s.invocation and s.invocation != min_invocation)
        if fresh and s.timeline != shown:
            for t in s.timeline[len(shown):] if s.timeline[: len(shown)] == shown else s.timeline:
                t_first = t_first or t.at
                if as_json:
                    print(json.dumps({"phase": str(t.phase), "at": t.at, "line": t.line}), flush=True)
                else:
                    print(f"[{fmt_s(t.at - t_first)}] {t.phase!s:<14} {t.line[:100]}", flush=True)
            shown = s.timeline
        if fresh and s.phase == Phase.READY:
            _result(as_json, "ready", s)
            return 0
        if fresh and s.phase == Phase.FAILED and s.failure is not None:
            await w.settle_failure()
            f = w.named(w.state.failure)
            if as_json:
                print(json.dumps({"failure": f.as_dict()}), flush=True)
            else:
                print(f"\nFAILED in {f.phase}: {f.kind}", file=sys.stderr)
                for x in f.excerpt[-40:]:
                    print("  | " + x, file=sys.stderr)
                print(f"hint: {f.hint}", file=sys.stderr)
            _result(as_json, "failed", w.state)
            return 1
        if not _stopped(s):
            stopped_at = None
        elif stopped_at is None:
            stopped_at = time.monotonic()
        elif time.monotonic() - stopped_at >= STOPPED_GRACE_S:
            if not await _start_in_progress(w):
                print(f"bringup: {w.name} is stopped: start it with 'bringup start {w.name}'", file=sys.stderr)
                _result(as_json, "stopped", s)
                return EXIT_STOPPED
            stopped_at = time.monotonic()  # a restart is under way: look again later
        left = deadline - time.monotonic()
        if left <= 0:
            cause = f"; {reported}" if reported else ""
            if s.stalled_for is not None:
                cause += f"; STALLED for {s.stalled_for:.0f} s"
            last = s.phase if s.unit is not None else "unknown (its state was never read)"
            print(f"timeout after {timeout:g} s; last phase: {last}{cause}", file=sys.stderr)
            _result(as_json, "timeout", s)
            return EXIT_TIMEOUT
        await w.wait_changed(min(left, 0.5))


async def cmd_wait(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Watch

    name, dep = settings.deployment(args.deployment)
    w = Watch(settings, name, dep)
    await w.start()
    try:
        return await _follow_until(w, args.timeout, args.json)
    finally:
        await w.close()


def _print_step(as_json: bool) -> Any:
    def show(step: Any) -> None:
        if as_json:
            print(json.dumps({"step": step.name, "status": step.status, "detail": step.detail, "at": step.at}),
                  flush=True)
        else:
            mark = {"done": "ok ", "running": "...", "failed": "ERR", "skipped": " - "}.get(step.status, "   ")
            print(f"  [{mark}] {step.name:<8} {step.detail}", flush=True)
    return show


async def _protocol(settings: Settings, args: argparse.Namespace, *, restart: bool) -> int:
    from tui.engine import Watch
    from tui.lifecycle.flags import apply_changes, diff, parse_changes
    from tui.ops import restart as protocol

    if settings.read_only:
        raise UsageError("read-only mode: restarts and flag changes are disabled (--read-only, read_only in the config "
                         "or BRINGUP_READ_ONLY)")
    name, dep = settings.deployment(args.deployment)
    w = Watch(settings, name, dep)
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
            return 0
        change_txt = diff(old, new, w.flag_specs)
        if restart and not args.yes:
            what = "; ".join(change_txt) or "no flag change"
            if not _ask(f"Restart {name} on {w.host_name} ({w.manager.target}) with {what}?"):
                print("cancelled; nothing changed")
                return 2
        if args.timeout:
            w.dep = dep.model_copy(update={"ready_timeout_s": args.timeout})
        print(f"{'restarting' if restart else 'starting'} {name} on {w.host_name}" +
              (f": {'; '.join(change_txt)}" if change_txt else ""), file=sys.stderr if args.json else sys.stdout)
        steps: list[protocol.Step] = []
        show = _print_step(args.json)

        def step(s: protocol.Step) -> None:
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
            f = failure
            print(f"\nFAILED in {f.phase}: {f.kind}", file=sys.stderr)
            for x in f.excerpt[-40:]:
                print("  | " + x, file=sys.stderr)
            print(f"hint: {f.hint}", file=sys.stderr)
        out({"ok": outcome.ok, "phase": str(outcome.phase), "message": outcome.message,
             "invocation": outcome.invocation, "failure": failure.as_dict() if failure else None,
             "rolled_back": outcome.rolled_back}, args.json, f"{name}: {outcome.message}")
        return _exit_code(outcome)
    finally:
        await w.close()


def _exit_code(outcome: Any) -> int:
    if outcome.ok:
        return 0
    if outcome.superseded:
        return EXIT_SUPERSEDED
    return 2 if outcome.refused else EXIT_TIMEOUT if outcome.timed_out else 1


def _interrupted(name: str, steps: list[Any], as_json: bool) -> int:
    """Ctrl-C in the middle of an action: one line of what was done and what was not, no traceback."""
    left = next((s.detail for s in reversed(steps) if s.name == "interrupted"), "nothing changed")
    if as_json:
        print(json.dumps({"ok": False, "interrupted": True, "left": left}), flush=True)
    print(f"bringup: {name}: interrupted: {left}", file=sys.stderr, flush=True)
    return 130


async def cmd_stop(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Watch
    from tui.ops import restart as protocol

    if settings.read_only:
        raise UsageError("read-only mode: start/stop is disabled")
    name, dep = settings.deployment(args.deployment)
    w = Watch(settings, name, dep)
    steps: list[protocol.Step] = []
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
        return _exit_code(o) if not o.timed_out else 1
    finally:
        await w.close()


async def cmd_flags(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Watch

    name, dep = settings.deployment(args.deployment)
    w = Watch(settings, name, dep)
    try:
        values = await w.flag_values()
    finally:
        await w.close()
    rows: list[dict[str, Any]] = []
    text = [f"{name} ({dep.preset})", f"  {'FLAG':<32}{'VALUE':<12}{'KEY':<5}HELP"]
    for f in w.flag_specs:
        value: str | bool | None = (True if values[f.name] is None else values[f.name]) if f.name in values \
            else False if f.kind == "bool" else None  # a switch that is not given is off, in JSON too
        rows.append({"name": f.name, "kind": f.kind, "value": value, "choices": list(f.choices), "key": f.key,
                     "help": f.help})
        # as the console's flags dialog shows them
        shown = "on" if value is True else "off" if value is False else "-" if value is None else str(value)
        kind = "|".join(f.choices) if f.choices else f.kind
        text.append(f"  {f.name:<32}{shown:<12}{f.key or ' ':<5}{f.help} [{kind}]")
    out(rows, args.json, "\n".join(text))
    return 0


def _recognised(lines: list[str], preset_name: str) -> bool:
    """Whether any line is SGLang or vLLM output (a logger prefix, a phase marker, the ready line, a fatal line,
    or systemd's word about the unit in a JSON journal): replaying the wrong file must say so, not "starting"."""
    from tui.lifecycle.lines import clean
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.replay import events_from_lines
    from tui.model import LogLine

    p = get_preset(preset_name)
    for ev in events_from_lines(lines):
        if not isinstance(ev, LogLine):
            return True
        c = clean(ev.text)
        t = c.text
        if (c.prefixed or p.ready.search(t) or p.fatal.search(t) or (p.serving is not None and p.serving.search(t))
                or any(m.pattern.search(t) for m in p.markers)):
            return True
    return False


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a recorded log. With --json, stdout is always one JSON object: the result, or `{"error": ...}`
    (the exit code and the one-line message on stderr stay as without --json)."""
    from tui.lifecycle.replay import replay

    name = "stdin" if args.file == "-" else args.file
    try:
        try:
            if args.file == "-":
                data = sys.stdin.buffer.read()
            else:
                with open(args.file, "rb") as fh:
                    data = fh.read()
        except OSError as e:
            raise UsageError(f"{args.file}: {e.strerror or e}") from None
        if b"\0" in data[:8192]:
            raise UsageError(f"{name}: a binary file, not a server log")
        lines = data.decode("utf-8", "replace").splitlines()
        r = replay(lines, args.preset)
        if not _recognised(lines, r.preset):
            raise UsageError(f"no SGLang or vLLM log lines recognised in {name}: give it a server's output, "
                             "`journalctl -u UNIT` or `journalctl -u UNIT -o json`")
    except Exception as e:
        if args.json:
            print(json.dumps({"error": str(e) or type(e).__name__}))
        raise
    d = r.as_dict()
    if args.json:
        print(json.dumps(d))
    else:
        s = r.state
        t0 = s.timeline[0].at if s.timeline else 0
        print(f"preset: {r.preset}")
        print(f"  {'PHASE':<14} {'BEGAN':>10} {'LASTED':>9}")
        for phase, at, secs in s.seconds_in():
            print(f"  {phase!s:<14} {f'+{at - t0:.1f}s':>10} {f'{secs:.1f}s':>9}")
        print(f"final: {s.phase}")
        if s.failure:
            f = s.failure
            print(f"failure: {f.kind} in {f.phase}")
            for x in f.excerpt[-40:]:
                print("  | " + x)
            print(f"hint: {f.hint}")
    return 1 if r.state.phase == Phase.FAILED else 0


async def cmd_bench(settings: Settings, args: argparse.Namespace) -> int:
    from tui.bench import BenchError, bench, render
    from tui.engine import Watch

    try:
        levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--concurrency takes numbers like 1,4,16, not {args.concurrency!r}") from None
    if not levels or min(levels) < 1 or max(levels) > 1024:
        raise UsageError("--concurrency levels must be between 1 and 1024")
    if min(args.prompt_tokens, args.max_tokens) < 1 or (args.requests is not None and args.requests < 1):
        raise UsageError("--prompt-tokens, --max-tokens and --requests must be positive")
    name, dep = settings.deployment(args.deployment)
    w = Watch(settings, name, dep)
    try:
        await w.connect_endpoint()
        endpoint = w.prober.endpoint
        result = await bench(endpoint, levels, requests=args.requests, prompt_tokens=args.prompt_tokens,
                             max_tokens=args.max_tokens, timeout=args.timeout)
    except BenchError as e:
        print(f"bringup: bench {name}: {e}", file=sys.stderr)
        return 1
    finally:
        await w.close()
    result["deployment"] = name
    out(result, args.json, render(result))
    return 0


async def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from tui.demo import run_demo

    return await run_demo(settings, args)


def _need_terminal(what: str) -> None:
    """The console reads keys from stdin and draws on stderr: without a terminal on both it would wait for keys
    that never come (a script that forgot its subcommand would hang, with a demo server started behind it)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        hint = "bringup demo --headless" if what == "demo" else "bringup status | wait | restart"
        raise UsageError(f"the {what} needs a terminal (stdin and stderr are not one here); for scripts: {hint}")


def run_console(settings: Settings, deployment: str | None, read_only: bool) -> int:
    from tui.app import run_app

    return run_app(settings, deployment, read_only=read_only)


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
        try:
            pending = asyncio.all_tasks(loop)
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=3.0))
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), 3.0))
        except (TimeoutError, RuntimeError):
            pass
        finally:
            loop.close()


def main(argv: Sequence[str] | None = None) -> int:
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a stuck bringup is
    with contextlib.suppress(ValueError, AttributeError, OSError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.cmd == "replay":
            return cmd_replay(args)
        ro = True if (args.read_only or getattr(args, "demo_read_only", False)
                      or getattr(args, "console_read_only", False)) else None
        settings = load(args.config, read_only=ro, scenario=getattr(args, "scenario", ""),
                        time_scale=getattr(args, "time_scale", 1.0))
        if args.cmd in (None, "console"):
            _need_terminal("console")
            return run_console(settings, getattr(args, "deployment", None), settings.read_only)
        handlers = {"status": cmd_status, "wait": cmd_wait, "stop": cmd_stop, "flags": cmd_flags,
                    "demo": cmd_demo, "bench": cmd_bench}
        if args.cmd == "demo" and not args.headless:
            _need_terminal("demo")
            from tui.app import run_app

            return run_app(settings, DEMO, read_only=settings.read_only, demo_keep=args.keep)
        if args.cmd in ("restart", "start"):
            return int(run_async(_protocol(settings, args, restart=args.cmd == "restart")))
        return int(run_async(handlers[args.cmd](settings, args)))
    except (ConfigError, UsageError, FlagValueError) as e:
        for line in str(e).splitlines():  # one problem a line, each a whole error line
            print(f"bringup: {line}", file=sys.stderr)
        return 2
    except (ManagerError, TransportError) as e:
        print(f"bringup: {e}", file=sys.stderr)
        return 2 if getattr(e, "permanent", False) else 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `bringup status | head`: the reader has gone; not an error worth a message
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps Python from complaining at exit
        return 141
    except Exception as e:  # last resort: one line, not a traceback, unless asked for
        if os.environ.get("BRINGUP_DEBUG"):
            raise
        print(f"bringup: internal error: {type(e).__name__}: {e} (BRINGUP_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1
