"""An incident record: one run of a deployment, from its history, as a person pastes it into a ticket (Markdown) or
a script reads it (the same content as one JSON object). Pure: the run and its history in, text out.

What it holds is what the write-ups of past incidents were assembled from by hand: the deployment, host, unit and
release; the flags and their change from the last run that reached ready; the phase timeline against the history;
the failure (phase, kind, hint) with its whole excerpt; the GPU memory at each step of the restart that led to the
run; the bringup actions on it; and the commands that go back. Secrets were redacted when the run was recorded.

Much of it is what a server printed (the excerpt, the release it said, a hint quoting it) and it is pasted into
tickets, where Markdown is rendered: every piece not bringup's own words goes through `quoted`, the one rule for
text quoted in Markdown here, so that nothing a server prints can close a code block (a line of three backticks
did), start a heading, a list or a table row, or make HTML, a link or an image.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from statistics import median
from typing import Any

from tui.guard.text import split_lines
from tui.lifecycle.eta import comparable, duration, key_groups
from tui.lifecycle.history import flags_diff, going_back, last_ready_before, startup_phases
from tui.lifecycle.lines import terminal_safe
from tui.lifecycle.presets import FlagSpec, Preset
from tui.lifecycle.run_record import GpuStep, RunEnd, RunRecord
from tui.lifecycle.way_back import way_back
from tui.model import EtaMatch

#: past ready runs a timeline is compared with
COMPARED_RUNS = 5
#: a row's parts and its used agree within this (figures read a moment apart, rounded)
GPU_SLACK_MIB = 64.0


class NoSuchRun(LookupError):
    """The run asked for is not on record: the message says what is."""


def pick(runs: Sequence[RunRecord], deployment: str, run: str = "") -> RunRecord:
    """The run named (an invocation, or its first characters), else the latest that did not reach ready, else the
    latest."""
    if not runs:
        raise NoSuchRun(f"no runs of {deployment} on record yet (bringup records each run it watches)")
    if run:
        found = [r for r in runs if r.invocation.startswith(run)]
        if len(found) == 1:
            return found[0]
        known = ", ".join(r.invocation[:12] for r in runs[-5:])
        what = "matches several runs" if found else "is not on record"
        raise NoSuchRun(f"run {run!r} of {deployment} {what} (latest: {known})")
    bad = [r for r in runs if not r.reached_ready or r.outcome == RunEnd.FAILED]
    return bad[-1] if bad else runs[-1]


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def incident(run: RunRecord, runs: Sequence[RunRecord], preset: Preset | None = None,
             extra: Sequence[FlagSpec] = (), hidden: Sequence[str] = ()) -> dict[str, Any]:
    """The record as one object (`bringup record --json`); `markdown` renders exactly this. With the deployment's
    `preset` (and its `extra_flags`), the way back is read as `restart` reads flags (way_back.py): only a command
    it accepts is offered. The "usual" column compares the runs the ETA does (eta.py `comparable`: the same flags,
    else those one flag or one key's flags apart, named; `hidden`: the deployment's `hide_flags`, not compared),
    never runs of other flags mixed in (issue 51)."""
    ready = last_ready_before(runs, run)
    earlier = [r for r in runs if r.reached_ready and r.started_at < run.started_at and r.invocation != run.invocation]
    together = key_groups(preset.flags) if preset is not None else ()
    compared, match, differs = comparable(earlier, run.flag_dict(), run.invocation, together, hidden)
    compared = compared[-COMPARED_RUNS:]
    timeline = []
    for s in run.timeline:
        # only the start-up's phases compare: how long a run rested ready or failed says nothing of this one
        past = [r.seconds_in(s.phase) for r in compared] if s.phase in startup_phases() else []
        timeline.append({"phase": str(s.phase), "at": s.at, "seconds": s.seconds,
                         "usual_s": round(median(past), 1) if past else None,
                         "range_s": [round(min(past), 1), round(max(past), 1)] if past else None})
    if preset is not None and ready is not None:
        offered = [*preset.for_version(run.release or None).flags, *extra]
        commands = way_back(run.deployment, run.argv, ready.argv, [*preset.flags, *extra], offered)
        back = next((c for c in commands if not c.startswith("#")), "")
    else:
        back = going_back(run.deployment, run.flag_dict(), ready.flag_dict()) if ready is not None else ""
        commands = [back] if back else []
    if ready is not None and not commands:
        commands.append(f"bringup restart {run.deployment}  # the flags are the last ready run's already")
    f = run.failure
    return {
        "deployment": run.deployment, "host": run.host, "unit": run.unit or None, "release": run.release or None,
        "invocation": run.invocation, "started_at": run.started_at, "outcome": str(run.outcome),
        "stalled_since": run.stalled_since, "last_line": run.last_line or None,
        "argv": list(run.argv), "flags": run.flag_dict(),
        "flags_diff_previous": list(run.flags_diff),
        "last_ready": None if ready is None else {"invocation": ready.invocation, "started_at": ready.started_at},
        "flags_diff_last_ready": list(flags_diff(ready.flag_dict(), run.flag_dict())) if ready is not None else None,
        "timeline": timeline,
        "compared_with": {"runs": len(compared), "same_flags": bool(compared) and match is EtaMatch.SAME_FLAGS,
                          "one_flag_apart": differs or None},
        "failure": None if f is None else {"phase": str(f.phase), "kind": f.kind, "hint": f.hint,
                                           "excerpt": "\n".join(f.excerpt)},
        "gpu_steps": [{"at": s.at, "step": s.step, "used_mib": s.used_mib, "this_run_mib": s.this_run_mib,
                       "previous_run_mib": s.previous_run_mib, "other_mib": s.other_mib,
                       "unattributed_mib": unattributed(s)} for s in run.gpu_steps],
        "gpu_mib_at_ready": run.gpu_mib_at_ready,
        "actions": [{"at": a.at, "who": a.who, "action": a.action, "change": a.change} for a in run.actions],
        "go_back": commands,
    }


def unattributed(s: GpuStep) -> float | None:
    """The memory on the deployment's GPUs no process was told to be: used less the run's, the run before's and
    the others' (processes not yet placed, a context the list does not show), so a row adds up; negative where the
    process list and the GPU totals disagree (read a moment apart); None where a part is unknown."""
    parts = (s.this_run_mib, s.previous_run_mib, s.other_mib)
    if s.used_mib is None or any(x is None for x in parts):
        return None
    return round(s.used_mib - sum(x for x in parts if x is not None), 1)


def usual_header(cmp: dict[str, Any]) -> str:
    """The timeline's "usual" column's header: which past runs it is (the same flags, or which one flag apart),
    their count said as a count ("usual (past ready runs ... but --x, 1)" read as a flag of 1, issue 51)."""
    n = cmp["runs"]
    if not n:
        return "usual (no past ready run with these flags, or all but one)"
    runs, differ = ("the past ready run", "differs") if n == 1 else (f"the {n} past ready runs", "differ")
    if cmp.get("one_flag_apart"):
        return f"usual ({runs} that {differ} only in {cmp['one_flag_apart']})"
    return f"usual ({runs} with these flags)"


def usual_words(t: dict[str, Any]) -> str:
    """A phase's "usual" cell: `1m10s (1m00s-1m20s)`, one figure where the runs agree, and "skipped by them" where
    none of them went through the phase (graph capture with graphs off), never `0.0s (0.0s-0.0s)`."""
    rng = t["range_s"]
    if rng is None:
        return "-"
    if rng[1] <= 0:
        return "skipped by them"
    low, high = duration(rng[0]), duration(rng[1])
    return duration(t["usual_s"]) if low == high else f"{duration(t['usual_s'])} ({low}-{high})"


class Quote(StrEnum):
    """Where quoted text goes in Markdown."""

    BLOCK = "block"    # a code block of its own
    INLINE = "inline"  # within a line of prose or a list item
    CELL = "cell"      # a table's cell


#: text with no meaning to Markdown (CommonMark and GitHub's: no emphasis, code, HTML, link, autolink, escape,
#: heading or list marker can be made of these alone), shown as it is; anything else goes in a code span
_PLAIN = re.compile(r"[^\W_]+(?:[ .,+=-]+[^\W_]+)*")
_TICKS = re.compile(r"`+")


def quoted(text: str, where: Quote = Quote.INLINE, info: str = "") -> str:
    """`text` (anything bringup did not write itself) quoted for Markdown `where` it goes, with nothing a terminal
    acts on (lifecycle/lines.py `terminal_safe`):

    - BLOCK: a fenced code block (`info` its language) whose fence is longer than any run of backticks in the text
      (at least three), so no line of it closes the block;
    - INLINE, CELL: on one line (line ends become spaces); a plain word or phrase as it is, anything else in a code
      span whose delimiter is longer than any backtick run in it; in a table's cell every `|` escaped (GitHub's
      tables split a row at a bare `|`, even inside a code span)."""
    text = terminal_safe(text)
    if where is Quote.BLOCK:
        longest = max((len(m) for m in _TICKS.findall(text)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"{fence}{info}\n{text}\n{fence}"
    flat = " ".join(split_lines(text)).strip()
    if not flat:
        return "-" if where is Quote.CELL else ""
    if _PLAIN.fullmatch(flat) and "www." not in flat.lower():
        return flat
    ticks = "`" * (max((len(m) for m in _TICKS.findall(flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    if where is Quote.CELL:
        flat = flat.replace("|", "\\|")
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def _gib(mib: float | None) -> str:
    return "-" if mib is None else f"{mib / 1024:.1f} GiB"


def _apart(rest: float | None, used: float | None) -> str:
    """The "not told apart" cell: what makes the row add up, or that its parts were read apart from its used
    (beyond GPU_SLACK_MIB, or 1% of used: the two figures are read a moment apart)."""
    if rest is None:
        return "-"
    slack = max(GPU_SLACK_MIB, 0.01 * (used or 0.0))
    if rest < -slack:
        return f"processes listed hold {_gib(-rest)} more than used (read a moment apart)"
    return _gib(rest if rest >= slack else 0.0)


def markdown(d: dict[str, Any]) -> str:
    """The record as Markdown: headings, a table per list, the excerpt and the commands in code blocks. Every piece
    of it that is not bringup's own words is `quoted`."""
    q, cell, block = quoted, lambda x: quoted(str(x), Quote.CELL), lambda x, info="": quoted(x, Quote.BLOCK, info)
    lines = [f"# {q(d['deployment'])}: run {q(d['invocation'][:12])} {d['outcome']}", ""]
    unit = f", unit {q(d['unit'])}" if d["unit"] else ""
    lines += [f"- **deployment**: {q(d['deployment'])} on {q(d['host']) or '?'}{unit}",
              f"- **release**: {q(d['release']) if d['release'] else 'not said by the server'}",
              f"- **run**: {q(d['invocation'])}, started {when(d['started_at'])}",
              f"- **outcome**: {d['outcome']}", ""]
    if d.get("stalled_since") is not None:  # a hang said as one: since when, and the last thing it printed
        lines += ["## Stalled", "", f"No log line or GPU memory change since {when(d['stalled_since'])}; its last "
                  "line:", "", block(d.get("last_line") or "(none seen)"), ""]
    f = d["failure"]
    if f is not None:
        lines += ["## Failure", "", f"**{q(f['kind'])}** in **{q(f['phase'])}**", "", f"hint: {q(f['hint'])}", "",
                  block(f["excerpt"]), ""]
    lines += ["## Flags", "", block(" ".join(d["argv"]) or "(no command line seen)"), ""]
    if d["last_ready"] is None:
        lines.append("No earlier run of this deployment reached ready on record.")
    elif d["flags_diff_last_ready"]:
        lines += [f"Changed since the last run that reached ready ({q(d['last_ready']['invocation'][:12])}, "
                  f"{when(d['last_ready']['started_at'])}):", "", block("\n".join(d["flags_diff_last_ready"]), "diff")]
    else:
        lines.append(f"The same flags as the last run that reached ready ({q(d['last_ready']['invocation'][:12])}).")
    if d["flags_diff_previous"] and d["flags_diff_previous"] != d["flags_diff_last_ready"]:
        lines += ["", "Changed since the run before:", "", block("\n".join(d["flags_diff_previous"]), "diff")]
    cmp = d["compared_with"]
    usual = usual_header(cmp)
    lines += ["", "## Timeline", "", f"| phase | began | lasted | {usual} |", "|---|---|---|---|"]
    for t in d["timeline"]:
        lines.append(f"| {cell(t['phase'])} | {when(t['at'])} | {duration(t['seconds'])} | {usual_words(t)} |")
    if d["gpu_steps"]:
        lines += ["", "## GPU memory at each step", "",
                  "Whose: the run under way at that step, the run before it (still releasing: at a restart's stop, "
                  "the run being stopped, once asked to), other processes, and what no process listed was told to "
                  "hold; the four add up to used.", "",
                  "| when | step | used | run under way | run before it | others | not told apart |",
                  "|---|---|---|---|---|---|---|"]
        for s in d["gpu_steps"]:
            lines.append(f"| {when(s['at'])} | {cell(s['step'])} | {_gib(s['used_mib'])} | "
                         f"{_gib(s['this_run_mib'])} | {_gib(s['previous_run_mib'])} | {_gib(s['other_mib'])} | "
                         f"{_apart(s.get('unattributed_mib'), s['used_mib'])} |")
    if d["actions"]:
        lines += ["", "## bringup actions", "", "| when | who | action | change |", "|---|---|---|---|"]
        for a in d["actions"]:
            lines.append(f"| {when(a['at'])} | {cell(a['who'])} | {cell(a['action'])} | {cell(a['change'])} |")
    lines += ["", "## Going back", ""]
    if d["go_back"]:
        lines.append(block("\n".join(d["go_back"]), "sh"))
    else:
        lines.append("No run of this deployment reached ready on record: nothing known-good to go back to.")
    return "\n".join(lines) + "\n"


def record_command(deployment: str, invocation: str) -> str:
    """The command that writes a run's record: what the console offers and a failed sweep configuration's log
    names."""
    return f"bringup record {deployment} {invocation[:12]}"
