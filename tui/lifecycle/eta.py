"""How long a start-up has left, from the deployment's own past runs: pure, so every front end says the same.

The past runs read are those that reached ready with this run's flags; when there are none, those one flag apart
(said so, naming the flag). The current phase's expected length is the median of theirs; where the server prints
its own progress through the phase (a shard bar, capture batches), the rate it shows is weighed in, the more the
further along it is. Later phases add their medians. No past run to go by: no ETA, and the reason, never a guess.
A run already slower in its phase than every past run by a margin says so, before a stall would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from statistics import median

from tui import words
from tui.guard.numbers import real_or_none, whole_or_none
from tui.lifecycle.history import startup_phases
from tui.lifecycle.presets import FlagSpec
from tui.lifecycle.run_record import RunRecord
from tui.lifecycle.secrets import redact_flags
from tui.model import EtaBasis, EtaMatch, NoEta, Phase, PhaseEta, Transition

#: the most recent past runs an ETA reads
LAST_RUNS = 5
#: a phase is "slower than usual" once it has lasted this much longer than the slowest past run's ...
SLOWER_FACTOR = 1.25
#: ... and at least this many seconds longer (a 2 s phase taking 3 s is no news)
SLOWER_MIN_S = 5.0
#: a phase's progress is frozen once no line has come for this many of the run's own gaps between its progress
#: lines (`k/n` steps, else 5 points of a percentage) ...
FROZEN_GAPS = 2.0
#: ... and at least this long: from then on no ready-time is promised (a countdown that grows a second every
#: second through a hang is a false promise, issue 51), well before the stall threshold says STALLED
FROZEN_MIN_S = 3.0
#: phases whose progress lines (a bar's percentage, `k/n`) measure the phase itself
_MEASURED = (Phase.LOADING, Phase.GRAPH_CAPTURE)
_PERCENT = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d+)?)\s?%")
_COUNT = re.compile(r"(?<![\d/])(\d+)/(\d+)(?![\d/])")


def progress_fraction(line: str) -> float | None:
    """The server's own progress in its latest line (`Loading safetensors checkpoint shards:  68% Completed |
    44/64`, `Capturing batches (bs=8 ...):  40%|...| 8/20`): 0..1, None when the line gives none."""
    m = _PERCENT.search(line)
    if m is not None and (pct := real_or_none(m[1], low=0.0, high=100.0, text=True)) is not None:
        return pct / 100.0
    c = _COUNT.search(line)
    done, total = (whole_or_none(c[1], low=0, text=True), whole_or_none(c[2], low=1, text=True)) if c else (None, None)
    if done is not None and total is not None and done <= total:
        return done / total
    return None


def _one_apart(a: Mapping[str, str | None], b: Mapping[str, str | None],
               together: Sequence[frozenset[str]] = ()) -> str:
    """The one flag two flag sets differ by (`--disable-cuda-graph`), "" when they differ by none or by more.
    `together`: flags one key of the preset sets at once (SGLang 0.5.23's `g`: `--cuda-graph-backend-decode` and
    `--cuda-graph-backend-prefill`), one change as the operator made it: named
    `--cuda-graph-backend-decode/--cuda-graph-backend-prefill`."""
    names = sorted(n for n in set(a) | set(b) if n not in a or n not in b or a[n] != b[n])
    if len(names) == 1 or (names and any(set(names) <= g for g in together)):
        return "/".join(f"--{n}" for n in names)
    return ""


def key_groups(flags: Iterable[FlagSpec]) -> tuple[frozenset[str], ...]:
    """The flags each key of a preset sets together (a flag and its `companions`): one change each, for the ETA."""
    return tuple(frozenset({f.name, *f.companions}) for f in flags if f.companions)


def _shown(flags: Mapping[str, str | None], hidden: Sequence[str]) -> dict[str, str | None]:
    """The flags less the deployment's `hide_flags` (prefixes, `--sim-`): those the command line shows."""
    prefixes = tuple(hidden)
    return {n: v for n, v in flags.items() if not (prefixes and f"--{n}".startswith(prefixes))}


def comparable(runs: Sequence[RunRecord], flags: Mapping[str, str | None], invocation: str,
               together: Sequence[frozenset[str]] = (), hidden: Sequence[str] = ()
               ) -> tuple[list[RunRecord], EtaMatch, str]:
    """The past ready runs to go by, newest last: same flags, else the largest group one flag (or one key's
    flags, `together`) apart. Flags the deployment hides from its command line (`hidden`, the demo simulator's
    `--scenario`) are not compared: an ETA never names a flag the operator cannot see."""
    mine = _shown(redact_flags(flags), hidden)  # the history keeps flags redacted: compare like with like
    ready = [r for r in runs if r.reached_ready and r.invocation != invocation]
    same = [r for r in ready if _shown(r.flag_dict(), hidden) == mine]
    if same:
        return same[-LAST_RUNS:], EtaMatch.SAME_FLAGS, ""
    groups: dict[str, list[RunRecord]] = {}
    for r in ready:
        flag = _one_apart(mine, _shown(r.flag_dict(), hidden), together)
        if flag:
            groups.setdefault(flag, []).append(r)
    if not groups:
        return [], EtaMatch.SAME_FLAGS, ""
    flag, group = max(groups.items(), key=lambda kv: (len(kv[1]), kv[1][-1].started_at))
    return group[-LAST_RUNS:], EtaMatch.ONE_FLAG_APART, flag


def estimate(runs: Sequence[RunRecord], *, deployment: str, invocation: str, flags: Mapping[str, str | None],
             phase: Phase, timeline: Sequence[Transition], now: float, latest_line: str = "",
             together: Sequence[frozenset[str]] = (), hidden: Sequence[str] = (),
             line_at: float | None = None) -> PhaseEta | NoEta | None:
    """The ETA of the run starting now (None when no run is starting: ready, failed, stopped). `together`: the
    flags a key sets at once (`key_groups`), one change; `hidden`: the deployment's `hide_flags`, not compared;
    `line_at`: when `latest_line` came (None: now). The server's pace is read at its line, so between two lines the
    time left counts down; once its progress has been frozen for longer than its own pace explains, no ETA."""
    if phase not in startup_phases() or not timeline:
        return None
    past, match, differs = comparable(runs, flags, invocation, together, hidden)
    if not past:
        if any(r.invocation == invocation and r.reached_ready for r in runs):
            return None  # read back once it is ready (`wait` on a ready run): "this one will be the first" is past
        if not any(r.reached_ready for r in runs if r.invocation != invocation):
            return NoEta(f"no ETA: no past run of {deployment} has reached ready yet (this one will be the first "
                         "on record)")
        return NoEta(f"no ETA: no past run of {deployment} with these flags, or all but one, reached ready")
    totals = [t for r in past if (t := r.ready_after_s) is not None]
    basis = EtaBasis(len(past), match, min(totals), max(totals), differs)
    medians = {p: median(r.seconds_in(p) for r in past) for p in startup_phases()}
    later = startup_phases()[startup_phases().index(phase) + 1:]
    borrowed = _borrowed(runs, past, invocation, (phase, *later)) if match == EtaMatch.ONE_FLAG_APART else {}
    medians.update(borrowed)
    entered = timeline[-1].at
    elapsed = max(0.0, now - entered)
    left = max(0.0, medians[phase] - elapsed)
    progress = progress_fraction(latest_line) if phase in _MEASURED and latest_line else None
    at = now if line_at is None else min(max(line_at, entered), now)
    if progress is not None and 0.0 < progress < 1.0 and at > entered:
        frozen = _frozen(latest_line, progress, at - entered, now - at)
        if frozen:
            return NoEta(f"no ETA: no progress in {phase} for {now - at:.0f} s (at {round(progress * 100)}%; "
                         f"{frozen}); none is promised until it moves")
        by_rate = (at - entered) * (1.0 - progress) / progress  # the server's own pace, as its last line showed
        usual_left = max(0.0, medians[phase] - (at - entered))
        left = max(0.0, progress * by_rate + (1.0 - progress) * usual_left - (now - at))
    elif progress is not None and progress >= 1.0:
        left = 0.0
    ready_left = left + sum(medians[p] for p in later)
    also = ", ".join(f"{p} ~{duration(s)}" for p, s in borrowed.items())
    return PhaseEta(phase, round(left, 1), round(ready_left, 1), basis, progress,
                    slower_note(past, phase, elapsed, medians[phase]),
                    f"with {also} from earlier runs that had it" if also else "")


def _frozen(line: str, progress: float, before: float, quiet: float) -> str:
    """Why the phase's progress counts as frozen ("" when it does not): no line for FROZEN_GAPS of the run's own
    gaps between progress lines (`before` seconds took it to `progress`; `quiet` seconds since)."""
    c = _COUNT.search(line)
    done = whole_or_none(c[1], low=1, text=True) if c else None
    gap = before / done if done else before * 0.05 / progress
    limit = max(FROZEN_MIN_S, FROZEN_GAPS * gap)
    if quiet < limit:
        return ""
    return f"its lines came every ~{duration(gap)} before"


def _borrowed(runs: Sequence[RunRecord], past: Sequence[RunRecord], invocation: str,
              phases: Sequence[Phase]) -> dict[Phase, float]:
    """The phases the runs one flag apart all skipped (graph capture, with graphs off there) that other ready runs
    on record went through: their median, newest LAST_RUNS. A run that skips it would not be one flag apart from
    those runs for nothing: the flag that differs is what turns the phase on (issue 51: "ready in ~4.3s", then 8.2 s
    of graph capture the comparison run never had)."""
    out: dict[Phase, float] = {}
    for p in phases:
        if any(r.seconds_in(p) > 0 for r in past):
            continue
        had = [s for r in runs if r.reached_ready and r.invocation != invocation and r not in past
               and (s := r.seconds_in(p)) > 0]
        if had:
            out[p] = median(had[-LAST_RUNS:])
    return out


def slower_note(past: Sequence[RunRecord], phase: Phase, elapsed: float, usual: float) -> str:
    """"loading 40% slower than the last 3 runs" once the phase has outlasted every past run's by the margin."""
    slowest = max(r.seconds_in(phase) for r in past)
    if slowest <= 0 or elapsed < slowest * SLOWER_FACTOR or elapsed - slowest < SLOWER_MIN_S:
        return ""
    pct = round((elapsed / usual - 1.0) * 100) if usual > 0 else 0
    runs = "the last run" if len(past) == 1 else f"the last {len(past)} runs"
    return f"{phase} {pct}% slower than {runs}"  # `492%` one word: a wrap never leaves the sign alone


def duration(s: float) -> str:
    """`42s`, `2m10s`, `1h05m`: an estimate's figure, whole seconds (its spread is wider than a tenth)."""
    return words.duration(s, tenths_below=10)


def based_on_words(b: EtaBasis) -> str:
    """`last 3 runs 6m40s-7m05s`, `last 2 runs 21s-22s (flags as these but --disable-cuda-graph)`; one figure
    where the two read the same. The flag apart comes after the figure, never between the runs and it: "the same
    flags but --tp-size 2.2s" read as a --tp-size of 2.2s (issue 51)."""
    runs = "last run" if b.runs == 1 else f"last {b.runs} runs"
    like = f" (flags as these but {b.differs})" if b.match == EtaMatch.ONE_FLAG_APART else ""
    fastest, slowest = duration(b.fastest_s), duration(b.slowest_s)
    spread = fastest if fastest == slowest else f"{fastest}-{slowest}"  # "28s", never "28s-28s"
    return f"{runs} {spread}{like}"


def eta_words(e: PhaseEta | NoEta) -> str:
    """One line, as the console, `status` and `wait` say it: `loading 68%, ~2m10s left, ready in ~5m00s; last 3
    runs 6m40s-7m05s`, or why there is no ETA."""
    if isinstance(e, NoEta):
        return e.reason
    pct = f" {round(e.progress * 100)}%" if e.progress is not None else ""  # one word: never broken at a wrap
    text = f"{e.phase}{pct}, ~{duration(e.phase_left_s)} left"
    if e.ready_left_s > e.phase_left_s:
        text += f", ready in ~{duration(e.ready_left_s)}"
    text += f"; {based_on_words(e.basis)}"
    text += f"; {e.also}" if e.also else ""
    return f"{text}; {e.slower}" if e.slower else text
