"""summary.csv and summary.md of a results directory, and the rule that names the best configuration.

Best, per cell: the highest output tok/s (total). Best overall: the highest mean output tok/s total over the valid
cells at the plan's highest concurrency (where a sweep's configurations differ most, and what serving is for);
ties go to the configuration listed first. Written at the end and on an interrupt, from the records alone, so
they can be rewritten from any results directory.
"""

from __future__ import annotations

import csv
import io
import statistics
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

SCALARS = ("completed", "failed", "duration_s", "tok_s_total", "tok_s_user", "tok_s_gpu", "req_s", "goodput_rps",
           "slo", "accept_len", "accept_rate", "accept_note")


def flag_words(flags: dict[str, str | bool | None]) -> str:
    return " ".join(f"--{k}" if v is True else f"(no --{k})" if v is None else f"--{k} {v}" for k, v in flags.items())


def best_config(res: SweepResults) -> str | None:
    cells = res.valid_cells()
    if not cells:
        return None
    top = max(c.concurrency for c in cells)
    order = list(res.meta.configs) if res.meta else []
    by: dict[str, list[float]] = {}
    for c in cells:
        if c.concurrency == top:
            by.setdefault(c.config, []).append(c.metrics.tok_s_total)
    if not by:
        return None
    return max(by, key=lambda n: (statistics.fmean(by[n]), -order.index(n) if n in order else 0))


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
             "run that changed or failed during the cell, `failed` configuration did not reach ready.", ""]
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
    lines += ["", "## Best per cell", "", "| cell | config | tok/s total | tok/s per user | TTFT p50 ms |",
              "|---|---|---|---|---|"]
    for cid, c in sorted(best_per_cell(res).items(), key=lambda kv: cells.index(kv[0]) if kv[0] in cells else 0):
        user = "-" if c.metrics.tok_s_user is None else f"{c.metrics.tok_s_user:.1f}"
        ttft = "-" if c.metrics.ttft_ms.p50 is None else f"{c.metrics.ttft_ms.p50:.0f}"
        lines.append(f"| {cid} | {c.config} | {c.metrics.tok_s_total:.1f} | {user} | {ttft} |")
    best = best_config(res)
    lines += ["", "## Best overall", ""]
    if best is None:
        lines.append("No valid cell: no best configuration.")
    else:
        rec = res.config_record(best)
        lines.append(f"**{best}** (highest mean output tok/s at the highest concurrency measured)")
        if rec is not None:
            lines += ["", "Launch flags: `" + flag_words(rec.flags) + "`", "", "```", " ".join(rec.argv), "```"]
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


def write_summaries(results_dir: Path) -> None:
    res = read_results(results_dir)
    write_atomic(results_dir / SUMMARY_CSV, summary_csv(res))
    write_atomic(results_dir / SUMMARY_MD, summary_md(res))


def _v(x: object) -> object:
    return "" if x is None else x
