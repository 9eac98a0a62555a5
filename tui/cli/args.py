"""The command line's grammar: the parser, its help texts and epilogs, and the error for wrong input.

Kept apart from the commands so that `bringup --help` (and a test of the help) loads no engine.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

from tui import __version__
from tui.config.demo import DEMO_PORT
from tui.exit_codes import ExitCode as X
from tui.guard.numbers import real, whole
from tui.lifecycle.presets.registry import display_names, preset_names
from tui.ops.wait import STOPPED_GRACE_S
from tui.sim.scenarios import DESCRIPTIONS, SCENARIOS

EPILOG = f"""\
exit codes: {X.OK:d} ok/ready, {X.FAILED:d} failed, {X.USAGE:d} usage/config error, refused or a permanent error \
(unknown host key, unit not
found), {X.TIMEOUT:d} timeout (not ready in time, or the old run's GPU memory not shown released in time: still \
held, or no
GPU readings to show it), {X.STOPPED:d} stopped (wait), {X.SUPERSEDED:d} superseded (another run replaced the one \
this command started, or its
lock was lost), {X.INTERRUPTED:d} interrupted.
config: --config, $BRINGUP_CONFIG, ./config.toml, $XDG_CONFIG_HOME/bringup/config.toml (a `demo` deployment
always exists). Docs: README.md and docs/.
"""

FLAG_NAMES = ("flags are named as on the server's command line without the leading `--`, e.g. "
              "`disable-cuda-graph` or `mem-fraction-static=0.85`")
DEPLOYMENT_HELP = "a deployment of the config (default: the only one configured, or `demo` if none is)"
#: `restart` and `stop` take a running server down: the same rule for both, at a terminal and in a script
CONFIRM_HELP = ("do not ask for confirmation (asked only at a terminal: with no terminal, as in a script or "
                "`ssh host bringup ...`, the command line is the instruction)")


class UsageError(Exception):
    """Wrong input from the user, or a refusal: the message to stderr, exit 2, nothing done."""


class ArgumentsError(UsageError):
    """What argparse found wrong with the command line, as one line in argparse's words (`bringup wait: error:
    argument --timeout: ...`): reported like any usage error (exit 2, JSON with --json), not argparse's usage
    block and exit."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as `ArgumentsError` (one line) instead of printed with the usage and
    exited on: `main` reports them as it reports every other error."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentsError(f"{self.prog}: error: {message} (see `{self.prog} --help`)")


def positive(kind: type[int] | type[float], unit: str = "") -> Callable[[str], float]:
    """An argparse `type` for a number that must be positive and finite (a timeout, a count, a time scale): zero,
    a negative number, NaN or infinity is a usage error before anything runs."""
    what = "a positive integer" if kind is int else "a positive number"
    what += f" of {unit}" if unit else ""

    def parse(text: str) -> float:
        try:
            # digits only, as every number from outside is taken (tui/guard/numbers.py): no `1_0`, no `0x10`
            x = whole(text, "", text=True) if kind is int else real(text, "", text=True)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes {what}, not {text!r}") from None
        if not math.isfinite(x) or x <= 0:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return x
    parse.__name__ = what  # argparse names the type by it in its own messages
    return parse


def non_negative(text: str) -> float:
    """An argparse `type` for seconds that may be zero (a grace): negative, NaN or infinity is a usage error."""
    try:
        x = real(text, "", text=True)  # digits only (tui/guard/numbers.py)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number of seconds, not {text!r}") from None
    if not math.isfinite(x) or x < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, not {text!r}")
    return x


non_negative.__name__ = "seconds"

def add_release_grace(c: argparse.ArgumentParser, stop: bool = False) -> None:
    """`--unverified-release-grace`: what a command does when the host gives no GPU readings at all (by default it
    waits for them up to release_timeout_s, then refuses with exit 3). Overrides unverified_release_grace_s."""
    what = ("call the stop done SECONDS after its processes are gone, RISKING A CUDA OOM for a start right after it"
            if stop else "start anyway SECONDS after the old run's processes are gone, RISKING A CUDA OOM")
    c.add_argument("--unverified-release-grace", type=non_negative, default=None, metavar="SECONDS",
                   dest="unverified_release_grace",
                   help=f"when the host gives no GPU readings (nvidia-smi missing, hanging, not permitted), {what}: "
                   "the old run's GPU memory release is then NOT verified. Default: the deployment's "
                   "unverified_release_grace_s; with neither, no readings within release_timeout_s refuses "
                   f"{'to call it done' if stop else 'the start'} (exit 3)")


def add_without_gpu_evidence(c: argparse.ArgumentParser) -> None:
    """`--without-gpu-evidence`: the named override of "no evidence, no change" (tui/ops/evidence.py), for this
    command only; its use is said in the steps and kept in the run history's actions."""
    c.add_argument("--without-gpu-evidence", action="store_true", dest="without_gpu_evidence",
                   help="go on although the host gives no GPU readings (nvidia-smi missing, failing, not permitted): "
                   "the old run's GPU memory release is then NOT verified, and the new run starts once its "
                   "processes are gone (after --unverified-release-grace, if given), RISKING A CUDA OOM. Without "
                   "it, such a command is refused before anything is touched (exit 2)")


def build_parser() -> argparse.ArgumentParser:
    # --config and --json work before or after the subcommand; in the subcommands they default to "not given"
    # so that they do not overwrite what the main parser read. `console` has no JSON output: no --json there.
    conf = Parser(add_help=False)
    conf.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                      help="config file (default: see below)")
    common = Parser(add_help=False, parents=[conf])
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")

    p = Parser(
        prog="bringup", description=f"Bring up and operate LLM inference servers ({', '.join(display_names())}): "
        "watch the lifecycle, GPUs and throughput, and restart with new flags safely.", epilog=EPILOG,
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
    c0.add_argument("deployment", nargs="*", help=DEPLOYMENT_HELP + " (several: the overview of those)")
    c0.add_argument("--read-only", action="store_true", dest="console_read_only",
                    help="console without restart, start/stop or flag keys")
    c0.add_argument("--only", action="store_true", dest="console_only",
                    help="show the named deployments and no other: the picker and the overview list none else "
                    "(what `bringup serve` runs)")

    s = add("status", "phase, timeline, failure, GPUs, throughput and flags, once",
            "Print one snapshot of a deployment: phase with its timeline, the failure (kind, excerpt, hint), "
            "GPU memory, throughput and flags.")
    s.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
    s.add_argument("--all", action="store_true", dest="all_deployments",
                   help="every configured deployment, one row each (one SSH connection per host)")

    w = add("wait", "follow until ready (0), failed (1), timeout (3) or stopped (4)",
            "Follow a deployment until it is ready (exit 0), failed (exit 1, with the error excerpt and a hint) "
            "or the timeout passes (exit 3), printing phase changes as they happen. A deployment that is stopped "
            f"(not running for {STOPPED_GRACE_S:g} s, and no restart or start in progress) ends the wait at once "
            "with exit 4. A drop-in for a `systemctl is-active` + `curl` polling loop: "
            "`bringup wait k26 --timeout 1800 && run-benchmarks`. Several deployments: exit 0 only when all are "
            "ready; the first that fails, stops or times out is printed at once and gives the exit code.")
    w.add_argument("deployment", nargs="*", help=DEPLOYMENT_HELP + " (several: wait for all of them)")
    w.add_argument("--timeout", type=positive(float, "seconds"), default=1800.0, metavar="S",
                   help="seconds to wait for ready (default 1800)")

    for name, what in (("start", "start"), ("stop", "stop")):
        detail = ("waits for the previous run to release its GPU memory first" if name == "start"
                  else "waits until it has exited and its GPU memory is released, so that a start right after "
                  "it cannot hit a CUDA OOM")
        c = add(name, f"{what} the deployment", f"{what.capitalize()} the deployment's server ({detail}).")
        c.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
        if name == "start":
            c.add_argument("--no-wait", action="store_true", help="return once started, do not wait for ready")
            c.add_argument("--timeout", type=positive(float, "seconds"), default=None, metavar="S",
                           help="seconds to wait for ready (default: the deployment's ready_timeout_s, 1800)")
        else:
            c.add_argument("--yes", "-y", action="store_true", help=CONFIRM_HELP)
        add_release_grace(c, stop=name == "stop")
        if name == "start":
            add_without_gpu_evidence(c)

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
    r.add_argument("--yes", "-y", action="store_true", help=CONFIRM_HELP)
    r.add_argument("--force", action="store_true",
                   help="restart even when --set/--unset change nothing (a flag already so, or not set)")
    r.add_argument("--no-wait", action="store_true", help="return once started, do not wait for ready")
    r.add_argument("--timeout", type=positive(float, "seconds"), default=None, metavar="S",
                   help="seconds to wait for ready (default: the deployment's ready_timeout_s, 1800)")
    r.add_argument("--rollback", action="store_true", help="on failure, go back to the last flags that were ready")
    add_release_grace(r)
    add_without_gpu_evidence(r)

    f = add("flags", "the flags the preset knows, their values and keys",
            "List the server flags bringup can toggle or set for this deployment, their current values and keys "
            f"(the console's keys). The {FLAG_NAMES}, as `restart --set` and `--unset` take them.")
    f.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)

    rec = add("record", "write one run's incident record (Markdown), from the run history",
              "Write one run of a deployment as a Markdown incident record, to paste into a ticket: the deployment, "
              "host, unit and release; the flags and their change from the last run that reached ready; the phase "
              "timeline against past runs; the failure with its whole excerpt; the GPU memory at each step; the "
              "bringup actions on it; and the commands to go back. Read from the run history bringup keeps under "
              "its state dir (secrets redacted). RUN: an invocation or its first characters (default: the latest "
              "run that did not reach ready, else the latest).")
    rec.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
    rec.add_argument("run", nargs="?", help="the run (default: the latest that did not reach ready)")
    rec.add_argument("--out", metavar="FILE", default="",
                     help="where to write it (default: STATE_DIR/deployments/NAME/records/RUN.md; - prints it)")

    rp = add("replay", "run the lifecycle reducer over a recorded log",
             "Replay a recorded log (plain text, journald short format, or `journalctl -o json` lines; - for "
             "stdin) through the same reducer as the console, and print the phase timeline, the final phase and "
             f"the failure. A file with no {' or '.join(display_names())} line in it, or a binary file, is refused "
             "(exit 2).")
    rp.add_argument("file", metavar="FILE|-", help="the log file, or - to read stdin")
    rp.add_argument("--preset", choices=(*preset_names(), "auto"), default="auto",
                    help="which server wrote the log (default auto: told from the log's lines)")

    b = add("bench", "measure tokens/s and TTFT with real streaming requests",
            "Send streaming chat completions to the deployment's OpenAI-compatible endpoint at each concurrency "
            "level and report time to first token, tokens/s per stream and aggregate tokens/s. Only this command "
            "sends load; nothing in bringup benchmarks on its own.\n\n  bringup bench k26 --concurrency 1,4,16")
    b.add_argument("deployment", nargs="?", help=DEPLOYMENT_HELP)
    b.add_argument("--concurrency", default="1,4", metavar="N,N,...", help="levels (default 1,4)")
    b.add_argument("--requests", type=positive(int), default=None, metavar="N",
                   help="requests per level (default 2x level, at least 4)")
    b.add_argument("--prompt-tokens", type=positive(int), default=128, metavar="N",
                   help="prompt length in tokens, about (default 128)")
    b.add_argument("--max-tokens", type=positive(int), default=128, metavar="N",
                   help="tokens to generate per request (default 128)")
    b.add_argument("--timeout", type=positive(float, "seconds"), default=120.0, metavar="S",
                   help="seconds per request (default 120)")

    sw = add("sweep", "server configurations x a benchmark matrix, each by a safe restart",
             "Walk the plan's server configurations, each brought up by the safe restart (under one lock held for "
             "the whole sweep, ready only on a generation from the new run, its command line checked), then warmup "
             "and the matrix's cells (prompt tokens x output tokens x concurrency x repeats). A cell measured "
             "across a crash or restart is retried once, then recorded invalid. Results (records.jsonl, "
             "summary.csv, summary.md) go to a directory whose path is printed first. Ctrl-C stops after the "
             "current step and says how to resume. The plan format is in docs/sweeps.md.\n\n"
             "  bringup sweep k26 plan.toml --dry-run\n  bringup sweep k26 plan.toml --yes --keep best\n"
             "  bringup sweep k26 --resume ~/.local/state/bringup/sweeps/k26-20260101T000000Z")
    sw.add_argument("deployment", help="a deployment of the config")
    sw.add_argument("plan", nargs="?", metavar="PLAN", help="the plan file (TOML); with --resume, the directory's")
    sw.add_argument("--dry-run", action="store_true", help="print the configurations, cells and an estimated time")
    sw.add_argument("--out", metavar="DIR", help="results directory (default <state dir>/sweeps/DEP-<UTC time>)")
    sw.add_argument("--resume", metavar="DIR", help="continue the sweep in DIR: only cells not yet valid are "
                    "measured (all of them for a configuration whose flags changed)")
    sw.add_argument("--keep", choices=("original", "best"), default="original",
                    help="at the end, put the deployment back on its original flags (default) or keep the best "
                    "configuration (highest mean output tok/s at the highest concurrency)")
    sw.add_argument("--request-timeout", type=positive(float, "seconds"), default=600.0, metavar="S",
                    help="seconds per request (default 600)")
    sw.add_argument("--yes", "-y", action="store_true", help=CONFIRM_HELP)
    add_release_grace(sw)

    ex = add("exporter", "serve the deployments' phases, failures and GPU memory to Prometheus",
             "Run the engines of the named deployments (default: every configured one but the demo) headless and "
             "serve their lifecycle truth at /metrics for Prometheus: phase, seconds in it, ready, stalled, failures "
             "by kind, GPU memory by owner, probe latency, data age. Runs until Ctrl-C or SIGTERM; changes nothing. "
             "The series, alerting rules and dashboard are in docs/exporter.md.\n\n"
             "  bringup exporter\n  bringup exporter k26 k27 --listen 127.0.0.1:9464")
    ex.add_argument("deployments", nargs="*", metavar="deployment", help="deployments of the config (default: all)")
    ex.add_argument("--listen", default="127.0.0.1:9464", metavar="HOST:PORT",
                    help="where to serve /metrics (default 127.0.0.1:9464; loopback only unless --allow-remote)")
    ex.add_argument("--allow-remote", action="store_true",
                    help="allow a non-loopback --listen address (the metrics have no authentication)")

    sv = add("serve", "the console in a browser (textual-serve), read-only unless --allow-actions",
             "Serve the console to a web browser through textual-serve: each browser tab runs its own console on "
             "the named deployments (none: the one configured, or the overview of all; several: the overview of "
             "those). Read-only unless --allow-actions; loopback only unless --token. An access token, printed once "
             "and asked for by the page, is generated with --token or --allow-actions (on loopback too: any user "
             "of the host reaches it). From another machine: `ssh -L 8000:127.0.0.1:8000 HOST`, then "
             "open http://127.0.0.1:8000 (docs/browser.md).\n\n"
             "  bringup serve k26\n  bringup serve --listen 0.0.0.0:8000 --token k26")
    sv.add_argument("deployments", nargs="*", metavar="deployment", help=DEPLOYMENT_HELP + " (several: the overview)")
    sv.add_argument("--listen", default="127.0.0.1:8000", metavar="HOST:PORT",
                    help="where to serve (default 127.0.0.1:8000; a non-loopback address needs --token)")
    sv.add_argument("--allow-actions", action="store_true",
                    help="the full console: restart, flags and start/stop work from the browser too (an access "
                    "token is then asked for, on loopback too)")
    sv.add_argument("--token", action="store_true",
                    help="ask for an access token (generated, printed once at start); needed off loopback, implied by "
                    "--allow-actions")

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
    d.add_argument("--time-scale", type=positive(float), default=1.0, metavar="F",
                   help="speed of the simulated bring-up (0.2 = five times faster)")
    d.add_argument("--headless", action="store_true", help="print phases instead of opening the console")
    d.add_argument("--read-only", action="store_true", dest="demo_read_only",
                   help="console without restart, start/stop or flag keys")
    return p
