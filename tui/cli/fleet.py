"""`bringup status --all` and `bringup wait A B C`: many deployments at once, for scripts.

Both go through the fleet (tui/engine/fleet.py): one SSH connection and one GPU stream per host, an engine per
deployment. Each deployment is read in a task of its own with its own time limit, so a host that does not answer
costs its own rows a note, never the others their answer.

`status --all` says what `status NAME` says of each deployment, in the same words (a row's note is the error
`status NAME` prints), and exits as `status NAME` would for the worst of them: 1 when one has failed or could not be
read, 2 when one cannot be read and trying again will not help (a permanent error), else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING, Any

import httpx

from tui.collectors.probes import error_words
from tui.config.settings import Settings
from tui.errors import PermanentError
from tui.exit_codes import ExitCode
from tui.lifecycle.nodes import host_names, node_name, split_gpu
from tui.lifecycle.release import own_memory_mib
from tui.managers import ManagerError
from tui.model import Phase
from tui.ops.wait import BecameReady, WaitOutcome, wait
from tui.transport import TransportError

from .report import config_field, config_words, out, snapshot_dict
from .wait_lines import Chronicle, WaitLines, wait_exit_code

if TYPE_CHECKING:
    from tui.engine import Engine

#: how long `status --all` gives one deployment (connect, read the unit, probe once) before it reports what it has
STATUS_EACH_S = 20.0
#: `wait a b c`: a phase line is held this long, for a line of another deployment read later but from earlier
LINE_LAG_S = 1.0
#: ... and until each deployment's history is in: its state read, then no new phase for this long
HISTORY_QUIET_S = 1.0
#: ... or this long after the wait began, whatever has come
HISTORY_CAP_S = 5.0
#: when one deployment ends the wait, the others are given this long to come to their own answer (a ready one is
#: proven ready by a generation) so that the last line says what each one is, not "waiting"
VERDICT_GRACE_S = 5.0


def deployment_gpus(e: Engine, d: dict[str, Any]) -> None:
    """The deployment's own GPUs, their memory summed and utilisation averaged, from the engine's keys (on several
    nodes a GPU is keyed by node: the JSON's per-GPU `index` is the host's own, so it cannot be matched there).
    `status NAME` says these too: a deployment on GPUs 0-1 of an 8-GPU host is not the host's eight (issue 51)."""
    snap = e.gpus
    keys = list(e.deployment_gpus())
    names = host_names(snap.gpus) if snap is not None else ()
    d["deployment_gpus"] = [f"{node_name(split_gpu(k)[0], names)}:{split_gpu(k)[1]}" for k in keys] if names else keys
    mine = [g for g in (snap.gpus if snap is not None else ()) if g.index in set(keys)]
    used = [g.mem_used_mib for g in mine if g.mem_used_mib is not None]
    util = [g.util_pct for g in mine if g.util_pct is not None]
    total = [g.mem_total_mib for g in mine if g.mem_total_mib is not None]
    #: what its GPUs hold, whoever holds it (the host's memory there)
    d["gpus_mem_used_mib"] = sum(used) if used else None
    d["deployment_mem_used_mib"] = d["gpus_mem_used_mib"]
    d["deployment_mem_total_mib"] = sum(total) if total else None
    d["deployment_util_pct"] = sum(util) / len(util) if util else None
    # one that runs nothing holds nothing (but what its last run still releases): its GPUs' memory and work are
    # others', never its own (a stopped deployment was charged another's 230 GiB: issue 51)
    own = own_memory_mib(e.state.unit, e.gpu.attribution(running=False)) if used else None
    if own is not None:
        d["deployment_mem_used_mib"], d["deployment_util_pct"] = own, None


def _row(d: dict[str, Any]) -> str:
    used, util = d.get("deployment_mem_used_mib"), d.get("deployment_util_pct")
    tp = d.get("throughput") or {}
    since = d["timeline"][-1]["seconds"] if d.get("timeline") else None
    failure = (d.get("failure") or {}).get("kind", "")
    queued = d["timeline"][-1].get("line", "") if d.get("phase") == "queued" and d.get("timeline") else ""
    note = d.get("note") or ("STALLED" if d.get("stalled_for") else "") or queued  # queued: the scheduler's why
    tps = tp.get("tokens_per_s")
    tok = "-" if tps is None else f"{tps:.1f}"
    mem = f"{used / 1024:.1f} GiB" if used is not None else "-"
    avg = f"{util:.0f}%" if util is not None else "-"
    age = "" if since is None else f"{since:.0f}s"
    return (f"{d['deployment']:<18} {d['host']:<14} {d['phase']:<14} "
            f"{age:>7} {failure:<14} {mem:>11} {avg:>5} {tok:>8}  {note}")


async def cmd_status_all(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine.fleet import Fleet
    from tui.engine.settle import settle

    fleet = Fleet(settings)
    if not fleet.engines:
        print("no deployments configured (the built-in demo aside): `bringup status demo`")
        return ExitCode.USAGE

    async def one(name: str) -> tuple[dict[str, Any], ExitCode]:
        e = fleet.engines[name]
        note, code = "", ExitCode.OK
        try:
            async with asyncio.timeout(STATUS_EACH_S):
                await settle(e)
        except TimeoutError:
            note, code = f"no answer within {STATUS_EACH_S:g} s", ExitCode.FAILED
        except (TransportError, ManagerError, OSError, httpx.HTTPError) as err:  # its row's note, not the end
            note, code = error_words(err), _read_error_code(err)
        d = snapshot_dict(e.snapshot(time.time()), {}, time.time())
        down = fleet.host_down(name)
        if down:
            note, code = f"host down: {down}", max(code, ExitCode.FAILED)  # the link's own word says it once
        d["note"] = note
        deployment_gpus(e, d)
        return d, max(code, ExitCode.FAILED if d["phase"] == "failed" else ExitCode.OK)

    try:
        answers = await asyncio.gather(*(one(n) for n in fleet.engines))
    finally:
        await fleet.close()
    rows = [d for d, _ in answers]
    head = (f"{'DEPLOYMENT':<18} {'HOST':<14} {'PHASE':<14} {'AGE':>7} {'FAILURE':<14} {'GPU MEM':>11} "
            f"{'UTIL':>5} {'TOK/S':>8}  NOTE")
    out({"config": config_field(settings), "deployments": rows}, args.json,
        "\n".join([config_words(settings), head, *(_row(d) for d in rows)]))
    return max((code for _, code in answers), default=ExitCode.OK)


def _read_error_code(err: BaseException) -> ExitCode:
    """The exit code `status NAME` gives when the deployment cannot be read (tui/cli/__init__.py `main`): 2 for a
    permanent error (an unknown host key, a unit that is not there), else 1."""
    return ExitCode.USAGE if isinstance(err, PermanentError) else ExitCode.FAILED


async def cmd_wait_many(settings: Settings, args: argparse.Namespace) -> int:
    """Wait for every named deployment: exit 0 only when all are ready; the first that ends otherwise (failed,
    stopped, timed out) ends the wait with its exit code: a script waiting on four servers has nothing to gain from
    the other three once one has failed. The others are given a moment (`VERDICT_GRACE_S`, less when they have
    answered) to say what they are, so that the last line says it: a deployment that is ready is reported ready.

    Every line is printed in the order of its time (`Chronicle`), once every deployment still waited for has had
    its history read (`HISTORY_QUIET_S`, at most `HISTORY_CAP_S`) and then `LINE_LAG_S` after its time: how one
    ended comes after its own phases, a second or so after it is known."""
    from tui.engine import STALE_AFTER_S
    from tui.engine.fleet import Fleet

    names = list(dict.fromkeys(settings.deployment(n)[0] for n in args.deployments))
    fleet = Fleet(settings, names)
    fleet.start()
    chronicle = Chronicle()
    began = time.monotonic()
    lines = {n: WaitLines(n, args.json, one_of_several=len(names) > 1, chronicle=chronicle) for n in names}
    tasks = {asyncio.create_task(wait(fleet.engines[n], args.timeout, lines[n], stale_after=STALE_AFTER_S),
                                 name=f"bringup-wait-{n}"): n for n in names}
    results: dict[str, str] = dict.fromkeys(names, "waiting")
    history_in: set[str] = set()

    def caught_up(n: str) -> bool:
        """Whether the deployment's history is in: its state read (or unreadable), then no phase for a while."""
        if n in history_in:
            return True
        e, heard = fleet.engines[n], lines[n].heard_at
        now = time.monotonic()
        read = e.unit_seen_at is not None or "unit" in e.collector_errors or not e.manager.can_control
        if now - began >= HISTORY_CAP_S or (read and now - began >= HISTORY_QUIET_S
                                            and (heard is None or now - heard >= HISTORY_QUIET_S)):
            history_in.add(n)
        return n in history_in

    def release() -> None:
        """Print the held phase lines no deployment still waited for can precede."""
        open_ = [n for n in names if results[n] == "waiting"]
        if not all(caught_up(n) for n in open_):
            return
        chronicle.release(time.time() - LINE_LAG_S if open_ else float("inf"))

    def answered(n: str) -> bool:
        """Whether a deployment still waited for has come as far as it will soon: its history in, no generation
        due to prove a ready line, not about to be found stopped."""
        s = fleet.engines[n].state
        return caught_up(n) and s.phase != Phase.STOPPED and not (s.ready_line_at is not None
                                                                   and s.phase != Phase.READY)

    pending = set(tasks)
    ended_by: tuple[str, WaitOutcome] | None = None
    grace_until: float | None = None
    try:
        while pending:
            if grace_until is not None and (time.monotonic() >= grace_until
                                            or all(answered(tasks[t]) for t in pending)):
                break
            done, pending = await asyncio.wait(pending, timeout=0.2, return_when=asyncio.FIRST_COMPLETED)
            for t in sorted(done, key=lambda t: names.index(tasks[t])):
                outcome: WaitOutcome = t.result()
                results[tasks[t]] = outcome.result
                if not isinstance(outcome, BecameReady) and ended_by is None:
                    ended_by = (tasks[t], outcome)
                    grace_until = time.monotonic() + VERDICT_GRACE_S
            release()
        for p in pending:
            p.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        chronicle.release()
        if len(names) > 1:
            phases = {n: str(fleet.engines[n].snapshot(time.time()).phase) for n in names}
            _say_how_all_ended(names, results, phases, ended_by, args.json)
        return wait_exit_code(ended_by[1]) if ended_by is not None else ExitCode.OK
    finally:
        for p in tasks:
            p.cancel()
        await fleet.close()


def _say_how_all_ended(names: list[str], results: dict[str, str], phases: dict[str, str],
                       ended_by: tuple[str, WaitOutcome] | None, as_json: bool) -> None:
    """The last line of a wait for several: all ready, or which one ended it and what each of the others is now
    (its wait's answer, else its current phase)."""
    if as_json:
        print(json.dumps({"result": "ready" if ended_by is None else ended_by[1].result,
                          "ended_by": None if ended_by is None else ended_by[0], "deployments": results,
                          "phases": phases}),
              flush=True)
    elif ended_by is None:
        print(f"all {len(names)} ready: {', '.join(names)}", flush=True)
    else:
        others = ", ".join(f"{n} {r if r != 'waiting' else phases[n]}" for n, r in results.items()
                           if n != ended_by[0])
        print(f"bringup: {ended_by[0]} {ended_by[1].result}; the wait ended there ({others})", file=sys.stderr,
              flush=True)
