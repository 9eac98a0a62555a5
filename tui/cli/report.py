"""What the headless commands print: JSON Lines with `--json`, plain text without, from the same dicts.

One way to print a failure (its headline, the end of its excerpt, the hint) for every command that shows one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from tui.config.settings import Settings
from tui.guard.text import split_lines
from tui.lifecycle.nodes import host_names, node_name, split_gpu, split_pid
from tui.lifecycle.secrets import redact_argv, redact_flags
from tui.lifecycle.usage_fold import fold_usage
from tui.model import Failure, GpuSnapshot, Snapshot

from .eta_report import eta_fields

#: lines of a failure's excerpt a command prints: the end of a traceback, where its cause is
EXCERPT_LINES = 40
#: `status` keeps room for the rest of the snapshot below the excerpt
STATUS_EXCERPT_LINES = 25


def out(obj: Any, as_json: bool, text: str) -> None:
    """`--json` output is JSON Lines: one object per line, so a stream of steps or phases and its final record
    read the same way (`jq`, or `json.loads` per line)."""
    if as_json:
        print(json.dumps(obj, default=str))
    else:
        print(text)


def error(message: str, code: int, as_json: bool, **extra: Any) -> int:
    """An error as every command reports it: `bringup: ...` on stderr, one line per problem, and with `--json` also
    exactly one object on stdout, `{"error": "...", "code": N}` (N the exit status), so a script reading stdout
    always reads JSON. Returns `code`."""
    lines = [ln for ln in split_lines(message) if ln.strip()] or ["error"]
    for line in lines:
        print(f"bringup: {line}", file=sys.stderr, flush=True)
    if as_json:
        obj: dict[str, Any] = {"error": "; ".join(lines), "code": int(code)}
        if len(lines) > 1:
            obj["errors"] = lines
        print(json.dumps({**obj, **extra}, default=str), flush=True)
    return code


def config_field(settings: Settings) -> str | None:
    """The config file in use, as an absolute path (`status --json`'s `"config"`); None when none was read."""
    path = settings.config_file
    return str(path.expanduser().resolve()) if path is not None else None


def config_words(settings: Settings) -> str:
    """The first line of a `status`: which config file is in use (`config: /etc/bringup/config.toml`), or that none
    is and where bringup looked: a user who edited one file while another one won sees it at once."""
    path = config_field(settings)
    return f"config: {path}" if path is not None else settings.config_source()


def fmt_s(x: float) -> str:
    return f"{x:6.1f}s"


def gpus_dict(g: GpuSnapshot | None) -> Any:
    if g is None:
        return None
    names = host_names(g.gpus)  # several nodes: each GPU and process says its host, with the host's own numbers

    def gpu(key: int | None) -> int | None:
        return None if key is None else split_gpu(key)[1]
    return {"error": g.error or None, "gpus": [
        {"index": gpu(x.index), "name": x.name, "mem_used_mib": x.mem_used_mib, "mem_total_mib": x.mem_total_mib,
         "util_pct": x.util_pct, "temp_c": x.temp_c, "power_w": x.power_w, "lost": x.lost,
         **({"host": x.host} if names else {})} for x in g.gpus],
        "processes": [{"pid": split_pid(p.pid)[1], "name": p.name, "gpu": gpu(p.gpu_index), "used_mib": p.used_mib,
                       **({"host": node_name(split_pid(p.pid)[0], names)} if names else {})}
                      for p in g.processes]}


def snapshot_dict(s: Snapshot, flags: dict[str, str | None], now: float,
                  settings: Settings | None = None) -> dict[str, Any]:
    """The status of one deployment as `status --json` prints it; with `settings`, led by the config file in use
    (`"config"`: its absolute path, null when none was read), which `render_status` prints first."""
    tl = []
    for i, t in enumerate(s.timeline):
        end = s.timeline[i + 1].at if i + 1 < len(s.timeline) else now
        tl.append({"phase": str(t.phase), "at": t.at, "seconds": round(max(0.0, end - t.at), 2), "line": t.line})
    tp = s.throughput
    head: dict[str, Any] = {} if settings is None else {"config": config_field(settings)}
    return {
        **head,
        "deployment": s.deployment, "host": s.host, "phase": str(s.phase), "invocation": s.invocation or None,
        "timeline": tl, "failure": s.failure.as_dict() if s.failure else None,
        # the runs failed one after another up to this one, and the last one's cause (a unit under `Restart=`)
        "crash_loop": s.crash_loop.as_dict() if s.crash_loop else None,
        "stalled_for": s.stalled_for,
        "unit": None if s.unit is None else {"active": s.unit.active, "sub": s.unit.sub, "main_pid": s.unit.main_pid,
                                              "exit_status": s.unit.exit_status},
        "gpus": gpus_dict(s.gpus),
        "throughput": None if tp is None else {"tokens_per_s": tp.tokens_per_s, "source": tp.source,
                                               "running": tp.running, "queued": tp.queued,
                                               "accept_len": tp.accept_len, "accept_rate": tp.accept_rate,
                                               "ttft_s": tp.ttft_s},
        # secrets' values as `***`: a status is pasted into tickets and read by monitoring (tui/lifecycle/secrets.py)
        "flags": redact_flags(flags), "argv": redact_argv(s.flags), "notes": list(s.notes),
        "attribution": None if s.attribution is None else {
            "current_mib": s.attribution.current_mib, "previous_mib": s.attribution.previous_mib,
            "other_mib": s.attribution.other_mib, "previous_gpus": list(s.attribution.previous_gpus),
            "note": s.attribution.note or None},
        "release": release_dict(s),
        **eta_fields(s.eta),  # how long the start-up has left, from this deployment's past runs (or why not)
    }


def gpus_line(d: dict[str, Any]) -> str:
    """The deployment's GPUs and their memory: only its own (`deployment_gpus`, where known) and how many the host
    has, not the host's all summed as if they were the deployment's (issue 51: GPUs 0-1 read as eight)."""
    rows = d["gpus"]["gpus"]
    own = d.get("deployment_gpus")
    if own is None or len(own) == len(rows):
        used = sum(x["mem_used_mib"] or 0 for x in rows) / 1024
        total = sum(x["mem_total_mib"] or 0 for x in rows) / 1024
        return f"GPUs: {len(rows)}, {used:.0f}/{total:.0f} GiB used"
    used = (d.get("gpus_mem_used_mib", d.get("deployment_mem_used_mib")) or 0) / 1024  # whoever's, on its GPUs
    total = (d.get("deployment_mem_total_mib") or 0) / 1024
    return (f"GPUs: {', '.join(str(k) for k in own)} (of {len(rows)} on the host), {used:.0f}/{total:.0f} GiB "
            "used on them")


def release_dict(s: Snapshot) -> dict[str, Any] | None:
    """The run's release as the server said it (`source`: its log or its HTTP answer), and the facts bringup goes
    by for it: `facts` the release whose facts they are, `exact` whether that is the server's own, `note` what
    stands in otherwise. None until the server has said."""
    seen, match = s.release_seen, s.release
    if seen is None:
        return None
    return {"version": seen.version, "source": str(seen.source),
            "facts": match.facts.version if match is not None and match.facts is not None else None,
            "exact": match.exact if match is not None else False, "note": match.note if match is not None else ""}


def failure_lines(headline: str, excerpt: Iterable[str], hint: str, last: int = EXCERPT_LINES) -> list[str]:
    """A failure as every command shows it: a headline, the last `last` lines of the excerpt (argparse's usage
    folded to one line: the error line after it is what matters), the hint."""
    return [headline, *("  | " + x for x in fold_usage(excerpt)[-last:]), f"hint: {hint}"]


def print_failure(f: Failure, file: TextIO | None = None, *, headline: str = "") -> None:
    """A live failure (`wait`, `start`, `restart`) on stderr after a blank line, or, with `headline`, any other
    (`replay` prints its own on stdout, as part of its result)."""
    head = headline or f"\nFAILED in {f.phase}: {f.kind}"
    print("\n".join(failure_lines(head, f.excerpt, f.hint)), file=file or sys.stderr)


def render_status(d: dict[str, Any]) -> str:
    lines = [f"config: {d['config'] or 'none (no config file was read)'}"] if "config" in d else []
    lines.append(f"{d['deployment']} on {d['host']}: {d['phase'].upper()}"
                 + (f"   (invocation {d['invocation'][:12]})" if d["invocation"] else ""))
    for t in d["timeline"]:
        lines.append(f"  {t['phase']:<14}{t['seconds']:8.1f}s  {t['line'][:90]}")
    rel = d["release"]
    if rel:
        said = "its log" if rel["source"] == "log" else "its HTTP answer"
        lines.append(f"release: {rel['version']} (said by {said}" + (f"; {rel['note']})" if rel["note"] else ")"))
    if d.get("eta"):
        lines.append(f"  eta: {d['eta']}")
    if d["stalled_for"]:
        lines.append(f"  STALLED: no progress for {d['stalled_for']:.0f}s")
    f = d["failure"]
    loop = d.get("crash_loop")
    if loop:
        lines.append(f"CRASH LOOP: {loop['words']}")
        if not f:  # the current run is starting again: the last failure is the loop's
            last = loop["last"]
            lines.extend(failure_lines(f"the last run failed in {last['phase']}: {last['kind']}",
                                       split_lines(last["excerpt"]), last["hint"], STATUS_EXCERPT_LINES))
    if f:
        lines.extend(failure_lines(f"failed in {f['phase']}: {f['kind']}", split_lines(f["excerpt"]), f["hint"],
                                   STATUS_EXCERPT_LINES))
    g = d["gpus"]
    if g and g["gpus"]:
        lines.append(gpus_line(d))
    elif g and g["error"]:
        lines.append(f"GPUs: {g['error']}")
    tp = d["throughput"]
    if tp and tp["tokens_per_s"] is not None:
        acc = f", accept length {tp['accept_len']:.2f}" if tp["accept_len"] else ""
        what = "throughput" if d["phase"] == "ready" else "last throughput while it served"
        # nothing running or queued and no token but bringup's own probes': say so, a 0 is no fault
        idle = ", idle" if tp["tokens_per_s"] == 0 and not tp["running"] and not tp["queued"] else ""
        lines.append(f"{what}: {tp['tokens_per_s']:.1f} tok/s ({tp['source']}{idle}){acc}")
    if d["flags"]:
        lines.append("flags: " + " ".join(f"--{k}" + ("" if v is None else f" {v}") for k, v in d["flags"].items()))
    lines.extend(f"note: {n}" for n in d["notes"])
    return "\n".join(lines)
