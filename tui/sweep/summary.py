"""summary.csv and summary.md of a results directory, and the rule that names the best configuration.

Best, per cell: the highest output tok/s (total). Best overall: the highest mean output tok/s total over the valid
cells at the plan's highest concurrency (where a sweep's configurations differ most, and what serving is for);
ties go to the configuration listed first. Written at the end and on an interrupt, from the records alone, so
they can be rewritten from any results directory.

A lead is claimed only where the data carry it: summary.md compares it with the spread of each configuration's own
measurements (the range of its repeats; with one repeat, its requests' TPOT from p50 to p90) and says "no clear
best: within spread" when the lead is no larger, with the number of requests each figure rests on.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tui.sweep.recorder import write_atomic
from tui.sweep.results import (
    LATENCY_METRICS,
    STAT_KEYS,
    SUMMARY_CSV,
    SUMMARY_MD,
    CellRecord,
    SweepResults,
    read_results,
)
from tui.words import noun, plural

SCALARS = ("completed", "failed", "duration_s", "tok_s_total", "tok_s_user", "tok_s_gpu", "req_s", "goodput_rps",
           "slo", "accept_len", "accept_rate", "accept_note")


def flag_words(flags: dict[str, str | bool | None]) -> str:
    return " ".join(f"--{k}" if v is True else f"(no --{k})" if v is None else f"--{k} {v}" for k, v in flags.items())


#: where the columns are defined: the docs' section (its GitHub anchor), linked from summary.md
METRICS_DOC = "docs/sweeps.md#the-metrics-client-side-per-cell"
#: ITL and TPOT means further apart than this (as a ratio) are explained in summary.md
ITL_TPOT_APART = 1.1


@dataclass(frozen=True, slots=True)
class Spread:
    """How much a configuration's own measurements vary, relative (0.12: 12 %), and what that is, in words."""

    rel: float
    text: str


@dataclass(frozen=True, slots=True)
class Standing:
    """One configuration's figure for the best overall: the mean output tok/s of its valid cells at the top
    concurrency, what it rests on, and its spread (None: no figure to judge it by)."""

    config: str
    tok_s: float
    cells: int
    requests: int
    repeats: int
    spread: Spread | None


@dataclass(frozen=True, slots=True)
class Verdict:
    concurrency: int
    #: best first (ties: the configuration listed first)
    ranking: tuple[Standing, ...]
    #: the others whose distance from the best is no more than the spread of either's own measurements
    within: tuple[Standing, ...]

    @property
    def best(self) -> Standing:
        return self.ranking[0]

    @property
    def clear(self) -> bool:
        """A best the data carry: no other configuration within spread of it."""
        return not self.within


def cell_spread(cells: list[CellRecord]) -> Spread | None:
    """The spread of one configuration's cells: per workload with repeats, the range of the repeats' tok/s over
    their mean; a workload measured once, its requests' TPOT p50 to p90 (E2E latency without a TPOT); the widest."""
    by: dict[tuple[int, int], list[CellRecord]] = {}
    for c in cells:
        by.setdefault((c.prompt_tokens, c.output_tokens), []).append(c)
    found: list[Spread] = []
    for (p, o), group in by.items():
        xs = [c.metrics.tok_s_total for c in group]
        if len(group) >= 2 and statistics.fmean(xs) > 0:
            found.append(Spread((max(xs) - min(xs)) / statistics.fmean(xs),
                                f"{len(xs)} repeats of p{p}-o{o} from {min(xs):.1f} to {max(xs):.1f} tok/s"))
            continue
        c = group[0]
        for label, st in (("TPOT", c.metrics.tpot_ms), ("E2E latency", c.metrics.e2el_ms)):
            if st.p50 and st.p90 is not None:
                n = c.metrics.completed
                whose = noun(n, "request's", "requests'")
                found.append(Spread(abs(st.p90 - st.p50) / st.p50, f"its {n} {whose} {label} "
                                    f"p50 {st.p50:.1f} to p90 {st.p90:.1f} ms"))
                break
    return max(found, key=lambda s: s.rel, default=None)


def _apart(a: float, b: float) -> float:
    """How far `a` is above `b`, relative to `b`."""
    return (a - b) / b if b > 0 else float("inf")


def _within(a: float, b: float, sa: Spread | None, sb: Spread | None) -> bool:
    """Whether `a` (the higher) and `b` are no further apart than the spread of either's measurements; with no
    spread known on either side, nothing tells them apart."""
    known = [s.rel for s in (sa, sb) if s is not None]
    return not known or _apart(a, b) <= max(known)


def best_overall(res: SweepResults) -> Verdict | None:
    """The best configuration of a results directory, and whether its lead is clear: see `verdict`."""
    return verdict(res.valid_cells(), res.meta.configs if res.meta else ())


def verdict(valid: Iterable[CellRecord], configs: Sequence[str] = ()) -> Verdict | None:
    """The one rule for "best", from valid cells (one per configuration and cell), ties to the first of `configs`.
    summary.md, the end of `bringup sweep`, `bringup sweep report` and the console's sweep view all call it, so
    none of them names a best that another calls within spread."""
    cells = list(valid)
    if not cells:
        return None
    top = max(c.concurrency for c in cells)
    order = list(configs)
    by: dict[str, list[CellRecord]] = {}
    for c in cells:
        if c.concurrency == top:
            by.setdefault(c.config, []).append(c)
    ranking = []
    for name, mine in by.items():
        loads = [(c.prompt_tokens, c.output_tokens) for c in mine]
        repeats = max(loads.count(w) for w in loads)
        ranking.append(Standing(name, statistics.fmean(c.metrics.tok_s_total for c in mine), len(mine),
                                sum(c.metrics.completed for c in mine), repeats, cell_spread(mine)))
    ranking.sort(key=lambda s: (-s.tok_s, order.index(s.config) if s.config in order else len(order)))
    b = ranking[0]
    within = tuple(o for o in ranking[1:] if _within(b.tok_s, o.tok_s, b.spread, o.spread))
    return Verdict(top, tuple(ranking), within)


def best_config(res: SweepResults) -> str | None:
    """The configuration `--keep best` keeps: the highest mean, whether or not its lead is clear."""
    v = best_overall(res)
    return v.best.config if v is not None else None


def best_per_cell(res: SweepResults) -> dict[str, CellRecord]:
    out: dict[str, CellRecord] = {}
    for c in res.valid_cells():
        if c.cell not in out or c.metrics.tok_s_total > out[c.cell].metrics.tok_s_total:
            out[c.cell] = c
    return out


def summary_csv(res: SweepResults) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    lat = [f"{m}_{k}" for m in LATENCY_METRICS for k in STAT_KEYS]
    w.writerow(["config", "flags", "cell", "prompt_tokens", "output_tokens", "concurrency", "repeat", "attempt",
                "invocation", "reason", *SCALARS, *lat])
    for c in res.valid_cells():
        rec = res.config_record(c.config)
        m = c.metrics.to_json()
        w.writerow([c.config, flag_words(rec.flags) if rec else "", c.cell, c.prompt_tokens, c.output_tokens,
                    c.concurrency, c.repeat, c.attempt, c.invocation or "", c.reason,
                    *(_v(m.get(k)) for k in SCALARS), *(_v(m[x][k]) for x in LATENCY_METRICS for k in STAT_KEYS)])
    return buf.getvalue()


def summary_md(res: SweepResults) -> str:
    meta = res.meta
    configs = list(meta.configs) if meta else sorted({c.config for c in res.cells})
    cells = list(meta.cells) if meta else sorted({c.cell for c in res.cells})
    title = f"# Sweep of {meta.deployment} ({meta.status})" if meta else "# Sweep"
    lines = [title, "", "Output tok/s (total) per configuration and cell; `-` not measured, `invalid` measured on a "
             "run that changed or failed during the cell, `failed` configuration did not reach ready. "
             f"Every column is defined in bringup's docs, [The metrics]({METRICS_DOC}).", ""]
    lines.append("| config | " + " | ".join(cells) + " |")
    lines.append("|---" * (len(cells) + 1) + "|")
    for name in configs:
        rec = res.config_record(name)
        row = []
        for cid in cells:
            c = res.cell(name, cid)
            if c is not None and c.valid:
                row.append(f"{c.metrics.tok_s_total:.1f}" + (f" ({c.metrics.failed} failed)" if c.metrics.failed
                                                             else ""))
            elif c is not None:
                row.append("invalid")
            else:
                row.append("failed" if rec is not None and rec.status == "failed" else "-")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines += ["", "## Best per cell", "", "Lead: over the next configuration of the cell; within spread when no more "
              "than the spread of either cell's requests (TPOT p50 to p90).", "",
              "| cell | config | tok/s total | lead | requests | tok/s per user | TTFT p50 ms |",
              "|---|---|---|---|---|---|---|"]
    for cid, c in sorted(best_per_cell(res).items(), key=lambda kv: cells.index(kv[0]) if kv[0] in cells else 0):
        user = "-" if c.metrics.tok_s_user is None else f"{c.metrics.tok_s_user:.1f}"
        ttft = "-" if c.metrics.ttft_ms.p50 is None else f"{c.metrics.ttft_ms.p50:.0f}"
        lines.append(f"| {cid} | {c.config} | {c.metrics.tok_s_total:.1f} | {_lead(res, c)} | "
                     f"{c.metrics.completed} | {user} | {ttft} |")
    lines += ["", "## Best overall", ""]
    lines += _overall(res)
    lines += _itl_vs_tpot(res)
    notes = {c.config: c.metrics.accept_note for c in res.valid_cells() if c.metrics.accept_note}
    if notes:  # speculating, but the server's counters cannot give the accept length: said, not left blank
        lines += ["", "## Accept length", ""]
        lines += [f"- **{name}**: {note}" for name, note in notes.items()]
    failed = [r for r in (res.config_record(n) for n in configs) if r is not None and r.status == "failed"]
    if failed:
        lines += ["", "## Failed configurations", ""]
        for r in failed:
            f = r.failure
            lines.append(f"- **{r.config}**: " + (f"{f.kind} in {f.phase}; hint: {f.hint}" if f else "failed"))
    return "\n".join(lines) + "\n"


def _lead(res: SweepResults, best: CellRecord) -> str:
    others = sorted((c for c in res.valid_cells() if c.cell == best.cell and c is not best),
                    key=lambda c: -c.metrics.tok_s_total)
    if not others:
        return "only one measured"
    nxt = others[0]
    lead = f"+{_apart(best.metrics.tok_s_total, nxt.metrics.tok_s_total):.1%} over {nxt.config}"
    if _within(best.metrics.tok_s_total, nxt.metrics.tok_s_total, cell_spread([best]), cell_spread([nxt])):
        lead += ", within spread"
    return lead


def _rests(group: tuple[Standing, ...]) -> str:
    """How many requests and repeats the figures rest on: once when they are the same for all."""
    def of(s: Standing) -> str:
        return f"{plural(s.requests, 'request')}, {plural(s.repeats, 'repeat')}"
    if len({of(s) for s in group}) == 1:
        return ("Each rests on " if len(group) > 1 else "It rests on ") + of(group[0]) + "."
    return "They rest on " + "; ".join(f"{s.config}: {of(s)}" for s in group) + "."


def _spread_words(s: Standing) -> str:
    return f"{s.config}: {s.spread.text}, {s.spread.rel:.1%}" if s.spread else f"{s.config}: no spread recorded"


def _overall(res: SweepResults) -> list[str]:
    v = best_overall(res)
    if v is None:
        return ["No valid cell: no best configuration."]
    b = v.best
    at = f"mean output tok/s at concurrency {v.concurrency} (the highest measured)"
    if len(v.ranking) == 1:
        out = [f"**{b.config}**: {b.tok_s:.1f} {at}, the only configuration measured there. {_rests((b,))}"]
    elif v.clear:
        o = v.ranking[1]
        out = [f"**{b.config}**: {b.tok_s:.1f} {at}, {_apart(b.tok_s, o.tok_s):.1%} above {o.config} "
               f"({o.tok_s:.1f}), beyond the spread of either's own measurements ({_spread_words(b)}; "
               f"{_spread_words(o)}). {_rests((b, o))}"]
    else:
        group = (b, *v.within)
        out = [f"No clear best: within spread. {' vs '.join(f'{s.config} {s.tok_s:.1f}' for s in group)} {at}: "
               f"{_apart(b.tok_s, v.within[-1].tok_s):.1%} apart, within their own spread "
               f"({'; '.join(_spread_words(s) for s in group)}). {_rests(group)} `--keep best` keeps {b.config}, "
               "the higher mean."]
    rec = res.config_record(b.config)
    if rec is not None:
        flags = f"`{flag_words(rec.flags)}`" if rec.flags else "the original flags"
        out += ["", f"Launch flags of {b.config}: {flags}", "", "```", " ".join(rec.argv), "```"]
    return out


def _itl_vs_tpot(res: SweepResults) -> list[str]:
    """Where a configuration's ITL and TPOT means differ, why: ITL is per streamed chunk, TPOT per token, and under
    speculative decoding a chunk carries the several tokens a step accepted."""
    apart: dict[str, CellRecord] = {}
    for c in res.valid_cells():
        itl, tpot = c.metrics.itl_ms.mean, c.metrics.tpot_ms.mean
        if not itl or not tpot or max(itl / tpot, tpot / itl) <= ITL_TPOT_APART:
            continue
        old = apart.get(c.config)
        if old is None or _ratio(c) > _ratio(old):
            apart[c.config] = c
    if not apart:
        return []
    out = ["", "## ITL vs TPOT", "", "ITL is the gap between streamed chunks, TPOT the time per output token "
           "((E2EL - TTFT) / (tokens - 1), per request); they part where a chunk carries several tokens, as under "
           "speculative decoding, whose chunks carry every token a step accepted.", ""]
    for name, c in apart.items():
        itl, tpot = c.metrics.itl_ms.mean or 0.0, c.metrics.tpot_ms.mean or 1.0
        why = f"about {itl / tpot:.1f} tokens a chunk" if itl > tpot else \
            "TPOT above ITL: TPOT runs to the end of each stream, ITL is pooled over the gaps between chunks"
        out.append(f"- **{name}** at {c.cell}: ITL mean {itl:.1f} ms, TPOT mean {tpot:.1f} ms: {why}")
    return out


def _ratio(c: CellRecord) -> float:
    itl, tpot = c.metrics.itl_ms.mean or 0.0, c.metrics.tpot_ms.mean or 0.0
    return max(itl / tpot, tpot / itl) if itl and tpot else 0.0


def write_summaries(results_dir: Path) -> None:
    res = read_results(results_dir)
    write_atomic(results_dir / SUMMARY_CSV, summary_csv(res))
    write_atomic(results_dir / SUMMARY_MD, summary_md(res))


def _v(x: object) -> object:
    return "" if x is None else x
