"""`bringup status --all` and `bringup wait A B C`: many deployments at once, for scripts.

Both go through the fleet (tui/engine/fleet.py): one SSH connection and one GPU stream per host, an engine per
deployment. Each deployment is read in a task of its own with its own time limit, so a host that does not answer
costs its own rows a note, never the others their answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING, Any

import httpx

from tui.config import Settings
from tui.exit_codes import ExitCode
from tui.lifecycle.nodes import host_names, node_name, split_gpu
from tui.managers import ManagerError
from tui.ops.wait import BecameReady, WaitOutcome, wait
from tui.transport import TransportError

from .follow import WaitLines, wait_exit_code
from .report import out, snapshot_dict

if TYPE_CHECKING:
    from tui.engine import Engine

#: how long `status --all` gives one deployment (connect, read the unit, probe once) before it reports what it has
STATUS_EACH_S = 20.0


def _deployment_gpus(e: Engine, d: dict[str, Any]) -> None:
    """The deployment's own GPUs, their memory summed and utilisation averaged, from the engine's keys (on several
    nodes a GPU is keyed by node: the JSON's per-GPU `index` is the host's own, so it cannot be matched there)."""
    snap = e.gpus
    keys = list(e.deployment_gpus())
    names = host_names(snap.gpus) if snap is not None else ()
    d["deployment_gpus"] = [f"{node_name(split_gpu(k)[0], names)}:{split_gpu(k)[1]}" for k in keys] if names else keys
    mine = [g for g in (snap.gpus if snap is not None else ()) if g.index in set(keys)]
    used = [g.mem_used_mib for g in mine if g.mem_used_mib is not None]
    util = [g.util_pct for g in mine if g.util_pct is not None]
    d["deployment_mem_used_mib"] = sum(used) if used else None
    d["deployment_util_pct"] = sum(util) / len(util) if util else None


def _row(d: dict[str, Any]) -> str:
    used, util = d.get("deployment_mem_used_mib"), d.get("deployment_util_pct")
    tp = d.get("throughput") or {}
    since = d["timeline"][-1]["seconds"] if d.get("timeline") else None
    failure = (d.get("failure") or {}).get("kind", "")
    note = d.get("note") or ("STALLED" if d.get("stalled_for") else "")
    tps = tp.get("tokens_per_s")
    tok = "-" if tps is None else f"{tps:.1f}"
    mem = f"{used / 1024:.1f} GiB" if used is not None else "-"
    avg = f"{util:.0f}%" if util is not None else "-"
    age = "" if since is None else f"{since:.0f}s"
    return (f"{d['deployment']:<18} {d['host']:<14} {d['phase']:<14} "
            f"{age:>7} {failure:<14} {mem:>11} {avg:>5} {tok:>8}  {note}")


async def cmd_status_all(settings: Settings, args: argparse.Namespace) -> int:
    from tui.engine.fleet import Fleet
    from tui.settle import settle

    fleet = Fleet(settings)
    if not fleet.engines:
        print("no deployments configured (the built-in demo aside): `bringup status demo`")
        return ExitCode.USAGE

    async def one(name: str) -> dict[str, Any]:
        e = fleet.engines[name]
        note = ""
        try:
            async with asyncio.timeout(STATUS_EACH_S):
                await settle(e)
        except TimeoutError:
            note = f"no answer within {STATUS_EACH_S:g} s"
        except (TransportError, ManagerError, OSError, httpx.HTTPError) as err:  # its row's note, not the end
            note = f"{type(err).__name__}: {err}"
        d = snapshot_dict(e.snapshot(time.time()), {}, time.time())
        down = fleet.host_down(name)
        d["note"] = f"host down: {down}" if down else note  # the link's own word says it once
        _deployment_gpus(e, d)
        return d

    try:
        rows = await asyncio.gather(*(one(n) for n in fleet.engines))
    finally:
        await fleet.close()
    head = (f"{'DEPLOYMENT':<18} {'HOST':<14} {'PHASE':<14} {'AGE':>7} {'FAILURE':<14} {'GPU MEM':>11} "
            f"{'UTIL':>5} {'TOK/S':>8}  NOTE")
    out({"deployments": rows}, args.json, "\n".join([head, *(_row(d) for d in rows)]))
    return ExitCode.FAILED if any(d["phase"] == "failed" for d in rows) else ExitCode.OK


async def cmd_wait_many(settings: Settings, args: argparse.Namespace) -> int:
    """Wait for every named deployment: exit 0 only when all are ready; the first that ends otherwise (failed,
    stopped, timed out) is printed at once and ends the wait with its exit code: a script waiting on four servers has
    nothing to gain from the other three once one has failed."""
    from tui.engine import STALE_AFTER_S
    from tui.engine.fleet import Fleet

    names = [settings.deployment(n)[0] for n in args.deployments]
    fleet = Fleet(settings, names)
    fleet.start()
    try:
        lines = {n: WaitLines(n, args.json, one_of_several=len(names) > 1) for n in names}
        tasks = {asyncio.create_task(wait(fleet.engines[n], args.timeout, lines[n], stale_after=STALE_AFTER_S),
                                     name=f"bringup-wait-{n}"): n for n in names}
        results: dict[str, str] = dict.fromkeys(names, "waiting")
        pending = set(tasks)
        ended_by: tuple[str, WaitOutcome] | None = None
        while pending and ended_by is None:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                outcome: WaitOutcome = t.result()
                results[tasks[t]] = outcome.result
                if not isinstance(outcome, BecameReady) and ended_by is None:
                    ended_by = (tasks[t], outcome)
        for p in pending:
            p.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if len(names) > 1:
            _say_how_all_ended(names, results, ended_by, args.json)
        return wait_exit_code(ended_by[1]) if ended_by is not None else ExitCode.OK
    finally:
        await fleet.close()


def _say_how_all_ended(names: list[str], results: dict[str, str], ended_by: tuple[str, WaitOutcome] | None,
                       as_json: bool) -> None:
    """The last line of a wait for several: all ready, or which one ended it and where the others were."""
    if as_json:
        print(json.dumps({"result": "ready" if ended_by is None else ended_by[1].result,
                          "ended_by": None if ended_by is None else ended_by[0], "deployments": results}),
              flush=True)
    elif ended_by is None:
        print(f"all {len(names)} ready: {', '.join(names)}", flush=True)
    else:
        others = ", ".join(f"{n} {r}" for n, r in results.items() if n != ended_by[0])
        print(f"bringup: {ended_by[0]} {ended_by[1].result}; the wait ended there ({others})", file=sys.stderr,
              flush=True)
