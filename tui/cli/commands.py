"""The commands that only read: `status`, `flags`, `replay` and `bench` (which sends load, but changes nothing)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from tui.config.parts import ConfigError
from tui.config.settings import Settings
from tui.exit_codes import ExitCode
from tui.guard.numbers import whole
from tui.model import Phase

from .args import UsageError
from .report import error, out, print_failure, render_status, snapshot_dict


async def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Engine
    from tui.engine.settle import settle

    from .fleet import deployment_gpus

    if getattr(args, "all_deployments", False):
        if args.deployment:
            raise UsageError("status: a deployment or --all, not both")
        from .fleet import cmd_status_all

        return await cmd_status_all(settings, args)
    try:
        name, dep = settings.deployment(args.deployment)
    except ConfigError as e:
        if args.deployment is None:  # several to choose from: the one command that shows them all, named
            raise ConfigError(f"{e}; or `bringup status --all` for every one") from None
        raise
    w = Engine(settings, name, dep)
    try:
        await settle(w)
        flags = await w.flag_values()
        # led by the config file it read, as `status --all` is: an edit of another file explains nothing
        d = snapshot_dict(w.snapshot(time.time()), flags, time.time(), settings)
        deployment_gpus(w, d)  # its own GPUs, not the host's all
    finally:
        await w.close()
    out(d, args.json, render_status(d))
    return ExitCode.FAILED if d["phase"] == "failed" else ExitCode.OK


async def cmd_flags(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Engine
    from tui.engine.settle import learn_release

    name, dep = settings.deployment(args.deployment)
    w = Engine(settings, name, dep)
    try:
        await learn_release(w)  # as `status` learns it: one server, one release, the same flags and keys
        values = await w.flag_values()
    finally:
        await w.close()
    rows: list[dict[str, Any]] = []
    text = [f"{name} ({w.release_words()})", f"  {'FLAG':<32}{'VALUE':<12}{'KEY':<5}HELP"]
    for f in w.editable_flags(values):
        value: str | bool | None = (True if values[f.name] is None else values[f.name]) if f.name in values \
            else False if f.kind == "bool" else None  # a switch that is not given is off, in JSON too
        rows.append({"name": f.name, "kind": f.kind, "value": value, "choices": list(f.choices), "key": f.key,
                     "help": f.help})
        # as the console's flags dialog shows them
        shown = "on" if value is True else "off" if value is False else "-" if value is None else str(value)
        kind = "|".join(f.choices) if f.choices else f.kind
        text.append(f"  {f.name:<32}{shown:<12}{f.key or ' ':<5}{f.help} [{kind}]")
    # one object, as `status` and `stop` print one: the deployment it is about, and its flags
    release = w.state.release.version if w.state.release is not None else None
    out({"deployment": name, "preset": dep.preset, "release": release, "flags": rows}, args.json, "\n".join(text))
    return ExitCode.OK


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a recorded log. With --json, stdout is always one JSON object: the result, or `{"error": ...,
    "code": N}` (written by `main`, as for every command; the one-line message on stderr stays as without
    --json)."""
    from tui.lifecycle.presets.registry import display_names
    from tui.lifecycle.replay import replay

    from .replay_input import log_lines

    name, lines = log_lines(args.file)  # read once, as it comes: bounded memory whatever the log's size
    try:
        r = replay(lines, args.preset)
    except OSError as e:
        raise UsageError(f"{name}: {e.strerror or e}") from None
    if not r.recognised:  # replaying the wrong file must say so, not "starting"
        servers = " or ".join(display_names())
        raise UsageError(f"no {servers} log lines recognised in {name}: give it a server's output, "
                         "`journalctl -u UNIT` or `journalctl -u UNIT -o json`")
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
        flags = s.flag_dict()
        if flags:  # read from the log's own arguments line: what the failure's hint was chosen by
            print("flags: " + " ".join(f"--{k}" + ("" if v is None else f" {v}") for k, v in flags.items()))
        if s.failure:
            print_failure(s.failure, sys.stdout, headline=f"failure: {s.failure.kind} in {s.failure.phase}")
    return ExitCode.FAILED if r.state.phase == Phase.FAILED else ExitCode.OK


async def cmd_bench(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Engine
    from tui.ops.bench import MAX_CONCURRENCY, BenchError, bench, render

    try:
        levels = [whole(x, "--concurrency", text=True) for x in args.concurrency.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--concurrency takes numbers like 1,4,16, not {args.concurrency!r}") from None
    if not levels or min(levels) < 1 or max(levels) > MAX_CONCURRENCY:  # the sweep's limit too: one rule
        raise UsageError(f"--concurrency levels must be between 1 and {MAX_CONCURRENCY}")
    if min(args.prompt_tokens, args.max_tokens) < 1 or (args.requests is not None and args.requests < 1):
        raise UsageError("--prompt-tokens, --max-tokens and --requests must be positive")
    name, dep = settings.deployment(args.deployment)
    w = Engine(settings, name, dep)
    try:
        await w.connect_endpoint()
        endpoint = w.prober.endpoint
        result = await bench(endpoint, levels, requests=args.requests, prompt_tokens=args.prompt_tokens,
                             max_tokens=args.max_tokens, timeout=args.timeout)
    except BenchError as e:
        return error(f"bench {name}: {e}", ExitCode.FAILED, args.json)
    finally:
        await w.close()
    result["deployment"] = name
    out(result, args.json, render(result))
    return ExitCode.OK


