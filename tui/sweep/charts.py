"""The sweep's charts and matrix as text: tokens/s against concurrency (one series per configuration), the Pareto
chart of tokens/s per user against tokens/s per GPU with its front marked, and the configurations x cells matrix.

The same drawing code serves the console (a textual-plotext widget's `plt`) and `bringup sweep report DIR` (a
plotext figure of its own, built to a string: no terminal needed, no global plotext state touched). Charts are drawn
one workload (prompt/output lengths) at a time: a line across context lengths would show a trade-off nobody has.
Series differ by marker as well as colour, so a report piped to a file or read without colours still tells them
apart. Only valid cells are drawn; a cell with no per-user or per-GPU figure is left out of the Pareto chart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from tui.sweep.board import Board, ConfigView, Mark, board, column_label, fmt_duration, fmt_tok_s, parse_cell_id
from tui.sweep.live import LiveSweep
from tui.sweep.results import SweepResults
from tui.words import noun, plural

#: one per configuration, in order, cycling: a colour for the console, a marker for a report without colours
COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "gray")
MARKERS = ("●", "▲", "■", "◆", "x", "+", "o", "*")
FRONT_COLOR = "white"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

Point = tuple[float, float]


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    x: float  # tokens/s per user
    y: float  # tokens/s per GPU
    config: str
    cell: str


# ---------------------------------------------------------------------------------------------------- data


def workloads(live: LiveSweep) -> list[tuple[int, int]]:
    """The (prompt, output) lengths of the plan's cells (and of any cell recorded outside it), in order."""
    out: list[tuple[int, int]] = []
    for cell in live.all_cells():
        s = parse_cell_id(cell)
        if s is not None and s.workload not in out:
            out.append(s.workload)
    return out


def throughput_series(live: LiveSweep, workload: tuple[int, int]) -> dict[str, list[Point]]:
    """Per configuration: (concurrency, tokens/s total) of its valid cells of this workload, repeats averaged."""
    by: dict[str, dict[int, list[float]]] = {}
    for rec in live.cells.values():
        if rec.valid and (rec.prompt_tokens, rec.output_tokens) == workload and _finite(rec.metrics.tok_s_total):
            by.setdefault(rec.config, {}).setdefault(rec.concurrency, []).append(rec.metrics.tok_s_total)
    order = [c for c in live.all_configs() if c in by] + [c for c in by if c not in live.all_configs()]
    return {c: [(float(k), fmean(v)) for k, v in sorted(by[c].items())] for c in order}


def pareto_points(live: LiveSweep, workload: tuple[int, int] | None) -> list[ParetoPoint]:
    """Every valid cell of this workload (of all workloads with None) that has both per-user and per-GPU
    tokens/s, in configuration order."""
    rank = {c: i for i, c in enumerate(live.all_configs())}
    out = [ParetoPoint(r.metrics.tok_s_user, r.metrics.tok_s_gpu, r.config, r.cell)
           for r in live.cells.values()
           if r.valid and (workload is None or (r.prompt_tokens, r.output_tokens) == workload)
           and r.metrics.tok_s_user is not None and r.metrics.tok_s_gpu is not None
           and _finite(r.metrics.tok_s_user) and _finite(r.metrics.tok_s_gpu)]
    return sorted(out, key=lambda p: (rank.get(p.config, len(rank)), p.x))


def pareto_front(points: Sequence[Point]) -> list[int]:
    """The indices of the points no other point beats on both axes (higher is better on both), by x ascending.
    Of equal points, the first is kept."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1], i))
    front: list[int] = []
    top = -math.inf
    for i in order:
        if points[i][1] > top:
            front.append(i)
            top = points[i][1]
    return front[::-1]


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


# ---------------------------------------------------------------------------------------------------- drawing


def _title(workload: tuple[int, int]) -> str:
    return f"prompt {workload[0]} / output {workload[1]} {noun(workload[1], 'token')}"


def draw_throughput(plt: Any, series: dict[str, list[Point]], workload: tuple[int, int], *,
                    configs: Sequence[str] = ()) -> None:
    """Tokens/s against concurrency on `plt` (plotext's API). Concurrency levels are evenly spaced (they grow
    by doubling as a rule: on a linear axis the low ones would pile up at the left); `configs` fixes each
    configuration's colour and marker across charts."""
    plt.clear_data()
    plt.clear_figure()
    levels = sorted({x for pts in series.values() for x, _ in pts})
    pos = {x: i for i, x in enumerate(levels)}
    top = max((y for pts in series.values() for _, y in pts), default=0.0)
    for name, pts in series.items():
        color, marker = _style(name, configs or list(series))
        xs, ys = [pos[x] for x, _ in pts], [y for _, y in pts]
        if len(pts) > 1:
            plt.plot(xs, ys, marker="braille", color=color)
        plt.scatter(xs, ys, marker=marker, color=color, label=name)
    plt.title(f"tokens/s total vs concurrency, {_title(workload)}")
    if levels:
        plt.xticks(list(range(len(levels))), [f"{x:g}" for x in levels])
        plt.xlim(-0.3, len(levels) - 0.7)
    plt.ylim(0, top * 1.08 if top > 0 else 1.0)
    plt.xlabel("concurrency")


def draw_pareto(plt: Any, points: Sequence[ParetoPoint], title: str, *, configs: Sequence[str] = ()) -> None:
    """Tokens/s per GPU (y) against tokens/s per user (x), a series per configuration, the Pareto front drawn
    as a line through its points (the configurations worth running at some interactivity target)."""
    plt.clear_data()
    plt.clear_figure()
    names = list(dict.fromkeys(p.config for p in points))
    front = [points[i] for i in pareto_front([(p.x, p.y) for p in points])]
    if len(front) > 1:
        plt.plot([p.x for p in front], [p.y for p in front], marker="braille", color=FRONT_COLOR,
                 label="Pareto front")
    for name in names:
        color, marker = _style(name, configs or names)
        mine = [p for p in points if p.config == name]
        plt.scatter([p.x for p in mine], [p.y for p in mine], marker=marker, color=color, label=name)
    if points:
        xs, ys = [p.x for p in points], [p.y for p in points]
        pad_x = (max(xs) - min(xs)) * 0.05 or max(1.0, max(xs) * 0.05)
        plt.xlim(max(0.0, min(xs) - pad_x), max(xs) + pad_x)
        plt.ylim(0, max(ys) * 1.08 if max(ys) > 0 else 1.0)
    plt.title(f"Pareto: tokens/s per GPU vs per user, {title}")
    plt.xlabel("tokens/s per user")


def _style(name: str, configs: Sequence[str]) -> tuple[str, str]:
    i = list(configs).index(name) if name in configs else len(configs)
    return COLORS[i % len(COLORS)], MARKERS[i % len(MARKERS)]


def chart_text(draw: Any, width: int, height: int, *, color: bool = False) -> str:
    """Build a chart to a string in a figure of its own. `draw(plt)` draws on it."""
    from plotext._figure import _figure_class  # plotext's figure: no global state, no terminal

    fig = _figure_class()
    fig.plotsize(max(30, width), max(8, height))
    draw(fig)
    if not color:
        fig.theme("clear")
    out = fig.build()
    return out if color else _ANSI.sub("", out)


# ---------------------------------------------------------------------------------------------------- matrix


def _cell_text(v: ConfigView, i: int) -> str:
    c = v.cells[i]
    if c.mark == Mark.VALUE:
        return c.text + ("!" if c.failed_requests else "") + ("*" if c.best else "")
    return c.text


def matrix_text(b: Board, width: int = 120) -> str:
    """The matrix as plain text, in blocks of columns that fit `width` (each block repeats the configuration
    column). tokens/s total per cell; `*` the best of its column, `!` some requests failed, `✗` invalid,
    `…` running, `-` pending, blank: its configuration failed or was skipped."""
    if not b.rows:
        return "no configurations yet"
    repeats = len({(s.prompt_tokens, s.output_tokens, s.concurrency) for s in map(parse_cell_id, b.cells) if s}) \
        < len(b.cells)
    labels = [column_label(c, repeats) for c in b.cells]
    name_w = max(13, *(len(r.name) for r in b.rows))
    status_w = max(6, *(len(r.status) for r in b.rows))
    col_w = [max(len(a), len(s), *(len(_cell_text(r, i)) for r in b.rows)) for i, (a, s) in enumerate(labels)]
    lead = name_w + 2 + status_w
    blocks: list[list[int]] = [[]]
    used = lead
    for i, w in enumerate(col_w):
        if blocks[-1] and used + 2 + w > width:
            blocks.append([])
            used = lead
        blocks[-1].append(i)
        used += 2 + w
    out: list[str] = []
    for block in blocks:
        if not block:
            continue
        head1 = f"{'configuration':<{name_w}}  {'status':<{status_w}}"
        head2 = " " * lead
        for i in block:
            head1 += f"  {labels[i][0]:>{col_w[i]}}"
            head2 += f"  {labels[i][1]:>{col_w[i]}}"
        out += [head1.rstrip(), head2.rstrip()]
        for r in b.rows:
            line = f"{r.name:<{name_w}}  {r.status:<{status_w}}"
            for i in block:
                line += f"  {_cell_text(r, i):>{col_w[i]}}"
            out.append(line.rstrip())
        out.append("")
    out.append("tok/s total per cell (prompt/output tokens, concurrency); * best of its column, ! some requests "
               "failed, ✗ invalid, … running, - pending")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------- report


def render_report(results: SweepResults, width: int = 100, height: int = 40, *, color: bool = False,
                  now: float | None = None) -> str:
    """`bringup sweep report DIR`: the sweep's state, the matrix, the failures with their hints, the best
    result, and per workload the throughput and Pareto charts (each up to half of `height` rows, `width`
    columns). `color`: ANSI colours in the charts (for a terminal); plain text otherwise."""
    live = LiveSweep.from_results(results)
    return report_text(live, width, height, color=color, now=now)


def report_text(live: LiveSweep, width: int = 100, height: int = 40, *, color: bool = False,
                now: float | None = None) -> str:
    meta = live.meta
    at = now if now is not None else (meta.finished_at or max((r.at for r in live.cells.values()), default=0.0)
                                      if meta else 0.0)
    b = board(live, at)
    out: list[str] = []
    if meta is not None:
        out.append(f"sweep of {meta.deployment} @ {meta.host}: {meta.status}, {plural(len(b.rows), 'configuration')} "
                   f"x {plural(len(b.cells), 'cell')}, {b.measured} measured")
    else:
        out.append(f"sweep (no sweep.json): {plural(b.measured, 'cell')} measured")
    out.append("")
    out.append(matrix_text(b, width))
    for r in b.rows:
        rec = r.record
        if r.state == "failed" and rec is not None and rec.failure is not None:
            f = rec.failure
            out.append(f"{r.name}: failed in {f.phase or '?'} ({f.kind or 'unknown'}) after "
                       f"{plural(rec.attempts, 'attempt')}")
            out += [f"  | {line}" for line in f.excerpt[-5:]]
            if f.hint:
                out.append(f"  hint: {f.hint}")
    invalid = [c.record for r in b.rows for c in r.cells if c.mark == Mark.INVALID and c.record is not None]
    for bad in invalid:
        out.append(f"{bad.config} {bad.cell}: invalid: {bad.reason or 'no reason given'}")
    if b.best is not None:  # the rule summary.md states: a lead inside the spread is no best
        flags = live.configs[b.best.config].flags if b.best.config in live.configs else {}
        shown = " ".join(f"--{k}" if v is True else f"--{k} {v}" for k, v in flags.items() if v is not None)
        shown = f" ({shown})" if shown else ""
        out.append(f"best: {b.best.config}, {b.best.figures}{shown}" if b.best.clear else
                   f"no clear best (within spread): {b.best.figures}; highest mean {b.best.config}{shown}")
    if b.end is not None and b.rows:
        out.append(f"end: {b.end.text}")
    if b.eta is not None:
        out.append(f"ETA {fmt_duration(b.eta.seconds)} ({plural(b.eta.cells_left, 'cell')} left, "
                   f"{fmt_duration(b.eta.mean_cell_s)} each)")
    configs = live.all_configs()
    chart_h = max(12, min(30, height // 2))
    for w in workloads(live):
        series = throughput_series(live, w)
        if not series:
            continue
        out.append("")
        out.append(chart_text(lambda plt, s=series, wl=w: draw_throughput(plt, s, wl, configs=configs),
                              width, chart_h, color=color))
        points = pareto_points(live, w)
        if points:
            out.append("")
            out.append(chart_text(lambda plt, p=points, wl=w: draw_pareto(plt, p, _title(wl), configs=configs),
                                  width, chart_h, color=color))
            front = [points[i] for i in pareto_front([(p.x, p.y) for p in points])]
            out.append("Pareto front: " + "; ".join(
                f"{p.config} {p.cell} ({fmt_tok_s(p.x)} tok/s/user, {fmt_tok_s(p.y)} tok/s/GPU)" for p in front))
    return "\n".join(out).rstrip() + "\n"
