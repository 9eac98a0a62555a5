"""`bringup sweep DEP PLAN`: configurations x a benchmark matrix, each configuration by the safe restart under one
lock, each cell valid only on one run (tui/sweep/runner.py); the results directory is printed first.

Ctrl-C once stops after the current step (a restart, or a cell) and writes the summaries; twice stops at once.
Either way nothing is restored behind the operator's back: the last lines say what the deployment runs now and
how to resume (`--resume DIR`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tui.config.settings import Settings
from tui.exit_codes import ExitCode
from tui.guard.numbers import real_or_none
from tui.words import plural

from .actions import _confirmed, with_release_grace
from .args import UsageError
from .report import error


def _plan_path(args: argparse.Namespace) -> Path:
    if args.plan:
        return Path(args.plan)
    if args.resume:
        return Path(args.resume) / "plan.toml"
    raise UsageError("give a plan file (bringup sweep DEP PLAN), or --resume DIR")


def _dry_run(name: str, plan: Any, as_json: bool, ready_after_s: Sequence[float] = ()) -> int:
    """`ready_after_s`: the start-to-ready seconds of the deployment's runs on record that reached ready, oldest
    first: the restart's figure is the history's, not a guess (issue 51: 300 s assumed where the history knew 28 s)."""
    from tui.lifecycle.eta import duration
    from tui.sweep.estimate import ASSUMED_DECODE_TOK_S, estimate_s, restart_figure
    from tui.sweep.summary import flag_words

    restart = restart_figure(ready_after_s)
    est = estimate_s(plan, restart_s=restart.seconds)
    assume = f"assuming {restart.words()} and {ASSUMED_DECODE_TOK_S:g} tok/s per stream"
    if as_json:
        print(json.dumps({"deployment": name, "plan": str(plan.path),
                          "configs": [{"name": c.name, "flags": c.flags} for c in plan.configs],
                          "cells": [{"cell": c.id, "prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
                                     "concurrency": c.concurrency, "repeat": c.repeat,
                                     "requests": plan.requests_for(c)} for c in plan.cells],
                          "estimate_s": round(est), "assumptions": assume}))
        return ExitCode.OK
    print(f"sweep {plan.name} on {name}: {plural(len(plan.configs), 'configuration')} x "
          f"{plural(len(plan.cells), 'cell')}")
    for c in plan.configs:
        print(f"  config {c.name}: {flag_words(c.flags) or '(original flags)'}")
    m = plan.matrix
    per = f"{m.duration_s:g} s" if m.duration_s else "requests"
    for c in plan.cells:
        n = plan.requests_for(c)
        print(f"  cell {c.id}: prompt {c.prompt_tokens or 'dataset'}, output {c.output_tokens}, concurrency "
              f"{c.concurrency}, " + (plural(n, 'request') if n is not None else per))
    if plan.slo is not None and plan.slo.describe():
        print(f"  SLO for goodput: {plan.slo.describe()}")
    print(f"estimated time: ~{duration(est)} ({assume}; warmup {plural(m.warmup_requests, 'request')} per "
          "configuration)")
    return ExitCode.OK


def _report(args: argparse.Namespace) -> int:
    from tui.sweep.charts import render_report
    from tui.sweep.results import RECORDS_FILE, read_results

    if not args.plan or not (Path(args.plan) / RECORDS_FILE).exists():
        raise UsageError("bringup sweep report DIR: DIR must be a sweep's results directory")
    results = read_results(args.plan)
    print(render_report(results))
    for note in results.notes:  # a record that could not be read: skipped, and said (stderr, one line each)
        print(f"bringup: sweep report: {note}", file=sys.stderr)
    return ExitCode.OK


async def cmd_sweep(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine import Engine
    from tui.engine.settle import running_release
    from tui.guard.files import UnsafeLocation
    from tui.guard.files import out_dir as out_dir_guarded
    from tui.ops.bench import MAX_CONCURRENCY
    from tui.sweep.plan import PlanError, load_plan
    from tui.sweep.recorder import Recorder
    from tui.sweep.results import RECORDS_FILE, default_results_dir, read_results
    from tui.sweep.runner import SweepAborted, SweepOptions, SweepRunner

    if args.deployment == "report":  # `bringup sweep report DIR`: the charts of a results directory
        return _report(args)
    name, dep = settings.deployment(args.deployment)
    w = Engine(settings, name, dep)
    w.dep = with_release_grace(dep, args)
    try:
        await running_release(w)  # the plan's flags are the running server's release's, not the newest known's
        plan = load_plan(_plan_path(args), w.offered_flags, max_concurrency=MAX_CONCURRENCY)
    except PlanError as e:
        await w.close()
        raise UsageError(str(e)) from None
    if args.dry_run:
        await w.close()  # the look at the running release may have opened its host's connection
        ready = [s for r in w.history.store.runs() if (s := r.ready_after_s) is not None]
        return _dry_run(name, plan, args.json, ready)
    if settings.read_only:
        raise UsageError("read-only mode: a sweep restarts the deployment (--read-only, read_only in the config or "
                         "BRINGUP_READ_ONLY)")
    if not w.manager.can_control:
        raise UsageError(f"{name} is observe-only (manager = 'none'): bringup cannot restart it")
    resume = None
    if args.resume:
        out_dir = Path(args.resume)
        if not (out_dir / RECORDS_FILE).exists():
            raise UsageError(f"--resume {out_dir}: not a sweep's results directory (no {RECORDS_FILE})")
        resume = read_results(out_dir)
        if resume.meta is not None and resume.meta.deployment != name:
            raise UsageError(f"--resume {out_dir}: a sweep of {resume.meta.deployment}, not of {name}")
    else:
        out_dir = Path(args.out) if args.out else default_results_dir(settings.state_path(), name)
        if args.out:  # one other users can write: a fresh private one made in it (what they put there is not ours)
            try:
                where = out_dir_guarded(args.out)
            except UnsafeLocation as e:
                raise UsageError(f"sweep: {e}") from None
            if where.note:
                print(f"bringup: {where.note}", file=sys.stderr, flush=True)
            out_dir = where.path
        if (out_dir / RECORDS_FILE).exists():
            raise UsageError(f"{out_dir} already holds a sweep's records: --resume {out_dir} continues it")
    if not _confirmed(f"Sweep {name} on {w.host_name}: {plural(len(plan.configs), 'configuration')}, each a "
                      f"restart, {plural(len(plan.cells), 'cell')} each?", args.yes):
        return error("cancelled; nothing changed", ExitCode.USAGE, args.json)

    def echo(record: dict[str, Any]) -> None:
        if args.json:
            print(json.dumps(record, default=str), flush=True)
        else:
            echo_text(record, lambda line: print(line, flush=True))

    try:
        recorder = Recorder(out_dir, echo)
    except UnsafeLocation as e:
        raise UsageError(f"sweep: {e}") from None
    recorder.copy_plan(plan.text)
    if args.json:
        print(json.dumps({"type": "start", "dir": str(out_dir), "deployment": name, "plan": str(plan.path),
                          "resume": bool(resume)}), flush=True)
    else:
        print(f"results: {out_dir}", flush=True)
    # the engine's URL of the run: a forwarded port for a remote loopback, the node a scheduler placed it on
    runner = SweepRunner(w, plan, recorder, lambda: w.prober.endpoint, SweepOptions(
        keep=args.keep, request_timeout_s=args.request_timeout, host=w.host_name, state_dir=settings.state_path(),
        resume=resume))
    _on_ctrl_c(runner, name)
    resume_hint = f"bringup sweep {name} --resume {out_dir}"
    try:
        await w.start()
        result = await runner.run()
    except SweepAborted as e:
        recorder.close()
        return error(f"sweep {name}: {e}", ExitCode.USAGE if str(e).startswith("refused") else ExitCode.FAILED,
                     args.json, dir=str(out_dir))
    except asyncio.CancelledError:
        now = f"; the deployment runs configuration {runner.current} (not restored)" if runner.current else ""
        print(f"bringup: {name}: sweep interrupted{now}; every record is kept in {out_dir}; resume with: "
              f"{resume_hint}", file=sys.stderr, flush=True)
        if args.json:
            print(json.dumps({"type": "done", "status": "interrupted", "dir": str(out_dir), "resume": resume_hint,
                              "code": int(ExitCode.INTERRUPTED)}), flush=True)
        recorder.close()
        return ExitCode.INTERRUPTED
    finally:
        await w.close()
    if result.status == "interrupted":
        code = ExitCode.INTERRUPTED
    elif result.status == "done" and not result.failed_configs and not result.invalid_cells:
        code = ExitCode.OK
    else:
        code = ExitCode.FAILED
    # valid cells: all of them, as summary.csv and `sweep report` count them; of those, new and resumed
    done: dict[str, Any] = {"type": "done", "status": result.status, "dir": str(out_dir), "message": result.message,
                            "best": result.best, "best_clear": result.best_clear, "valid_cells": result.valid_cells,
                            "new_cells": result.new_cells, "resumed_cells": result.resumed_cells,
                            "invalid_cells": result.invalid_cells, "failed_configs": result.failed_configs,
                            "code": int(code)}
    if result.status == "interrupted":
        done["resume"] = resume_hint
    recorder.echo = None
    recorder.append(done)
    recorder.close()
    if args.json:
        print(json.dumps(done), flush=True)
    else:
        for line in end_lines(result, out_dir):
            print(line)
        if result.status == "interrupted":
            now = f"the deployment runs configuration {runner.current} (not restored); " if runner.current else ""
            print(f"interrupted: {now}resume with: {resume_hint}", file=sys.stderr)
    return code


def end_lines(result: Any, out_dir: Path) -> list[str]:
    """The last lines of a sweep without --json: what it measured, what failed, and its best by the one rule
    (tui/sweep/summary.py `verdict`, as summary.md, `sweep report` and the console say it)."""
    kept = f" ({result.new_cells} new, {result.resumed_cells} resumed)" if result.resumed_cells else ""
    out = [f"sweep {result.status}: {plural(result.valid_cells, 'valid cell')}{kept}, {result.invalid_cells} "
           f"invalid, {plural(len(result.failed_configs), 'configuration')} failed"
           + (f" ({', '.join(result.failed_configs)})" if result.failed_configs else "")]
    if result.best and result.best_clear:
        out.append(f"best: {result.best} (summary: {out_dir / 'summary.md'})")
    elif result.best:
        out.append(f"no clear best (within spread); highest mean {result.best} (summary: {out_dir / 'summary.md'})")
    return out


def _on_ctrl_c(runner: Any, name: str) -> None:
    """The first Ctrl-C asks the runner to stop after its current step; a second one cancels at once."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    pressed = 0

    def handler() -> None:
        nonlocal pressed
        pressed += 1
        if pressed == 1:
            runner.request_stop()
            print(f"bringup: {name}: stopping after the current step (Ctrl-C again to stop now)", file=sys.stderr,
                  flush=True)
        elif task is not None:
            task.cancel()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, handler)


def echo_text(record: dict[str, object], say: Callable[[str], None]) -> None:
    """A record as one line of text, for the CLI without --json."""
    t = record.get("type")
    if t == "step":
        mark = {"done": "ok ", "running": "...", "failed": "ERR", "skipped": " - "}.get(str(record["status"]), "   ")
        say(f"  [{mark}] {record['config']}: {record['name']:<8} {record['detail']}")
    elif t == "config":
        f = record.get("failure")
        if record["status"] == "ready":
            say(f"config {record['config']}: ready in {record['ready_s']} s (invocation "
                f"{str(record['invocation'])[:12]})")
        else:
            what = f"{f['kind']} in {f['phase']}; hint: {f['hint']}" if isinstance(f, dict) else ""
            n = record["attempts"]
            tries = plural(n, "attempt") if isinstance(n, int) else f"{n} attempts"
            say(f"config {record['config']}: {str(record['status']).upper()} after {tries}: {what}")
    elif t == "cell":
        m = record["metrics"]
        assert isinstance(m, dict)
        if record["valid"]:
            say(f"  cell {record['config']} {record['cell']}: {m['tok_s_total']:.1f} tok/s, TTFT p50 "
                f"{_fmt(m['ttft_ms']['p50'])} ms, TPOT p50 {_fmt(m['tpot_ms']['p50'])} ms, {m['completed']} ok, "
                f"{m['failed']} failed" + (f" (attempt {record['attempt']})" if record["attempt"] != 1 else ""))
        else:
            say(f"  cell {record['config']} {record['cell']}: INVALID ({record['reason']})")


def _fmt(x: object) -> str:
    n = real_or_none(x)  # a record's number, taken as every number from outside is (tui/guard/numbers.py)
    return "-" if n is None else f"{n:.0f}"
