"""The sweep at a glance, as plain data: the configurations x cells matrix, where the sweep stands (the current
configuration's restart steps, the ETA) and the best result so far.

One model for both front ends: the console's sweep view styles it (widgets/sweep.py) and `bringup sweep report`
prints it (tui/sweep/charts.py), so the two cannot disagree about what a cell shows. Pure: `now` is an argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from statistics import fmean

from tui.guard.numbers import whole_or_none
from tui.sweep.live import LiveSweep
from tui.sweep.results import DONE, RUNNING, CellRecord, ConfigRecord, StepRecord
from tui.sweep.summary import verdict
from tui.words import duration

_CELL_ID = re.compile(r"^p(\d+)-o(\d+)-c(\d+)-r(\d+)$")


class Mark(StrEnum):
    """What a matrix cell shows."""

    VALUE = "value"  # measured: tokens/s total
    RUNNING = "running"  # being measured now
    INVALID = "invalid"  # measured, not a result (the server restarted meanwhile, ...): the reason says why
    PENDING = "pending"  # not measured yet
    NOT_RUN = "not-run"  # its configuration failed or was skipped: it never will be

SYMBOL = {Mark.RUNNING: "…", Mark.INVALID: "✗", Mark.PENDING: "-", Mark.NOT_RUN: ""}


@dataclass(frozen=True, slots=True)
class Shape:
    """A cell's coordinates, read from its id (`p1024-o256-c32-r0`)."""

    prompt_tokens: int
    output_tokens: int
    concurrency: int
    repeat: int

    @property
    def workload(self) -> tuple[int, int]:
        """Prompt and output lengths: the charts draw one workload at a time (mixing context lengths in one line
        would draw a trade-off nobody has)."""
        return self.prompt_tokens, self.output_tokens


def parse_cell_id(cell: str) -> Shape | None:
    m = _CELL_ID.match(cell)
    if not m:
        return None
    nums = [n for g in m.groups() if (n := whole_or_none(g, low=0, text=True)) is not None]
    return Shape(*nums) if len(nums) == len(m.groups()) else None


@dataclass(frozen=True, slots=True)
class CellView:
    mark: Mark
    text: str  # what the matrix shows: "1,234", "…", "✗", "-", ""
    record: CellRecord | None = None
    best: bool = False  # the highest tokens/s of its column

    @property
    def failed_requests(self) -> int:
        return self.record.metrics.failed if self.record is not None else 0


@dataclass(frozen=True, slots=True)
class ConfigView:
    name: str
    #: ready | failed | running | skipped | pending: the key of its style
    state: str
    #: what its status column says: "failed (cuda-graph)"
    status: str
    record: ConfigRecord | None
    cells: tuple[CellView, ...]


@dataclass(frozen=True, slots=True)
class Eta:
    seconds: float
    cells_left: int
    mean_cell_s: float
    bringups_left: int


@dataclass(frozen=True, slots=True)
class Best:
    """The best configuration so far by the sweep's one rule (`verdict` in tui/sweep/summary.py, which summary.md
    and the end of `bringup sweep` use too): the highest mean tokens/s total of its valid cells at the highest
    concurrency measured. `within`: the others no further from it than the spread of their own measurements, with
    their means; none, a clear best. A single cell's peak is not it: one lucky cell would crown a configuration the
    summary then calls within spread."""

    config: str
    tok_s: float
    concurrency: int
    within: tuple[tuple[str, float], ...] = ()

    @property
    def clear(self) -> bool:
        return not self.within

    @property
    def figures(self) -> str:
        """What the claim rests on: "1,234 tok/s mean at concurrency 32", or with others within spread
        "a 209.4 vs b 203.7 tok/s mean at concurrency 8"."""
        at = f"tok/s mean at concurrency {self.concurrency}"
        if self.clear:
            return f"{fmt_tok_s(self.tok_s)} {at}"
        group = ((self.config, self.tok_s), *self.within)
        return " vs ".join(f"{name} {fmt_tok_s(v)}" for name, v in group) + f" {at}"


@dataclass(frozen=True, slots=True)
class EndView:
    """The sweep's last step, after its configurations: the deployment put back on its original flags, or on the
    best configuration with `--keep best`. A step of the sweep, shown as one, never as a configuration."""

    #: "restore the original flags" | "keep the best configuration"
    action: str
    #: pending | running | done | failed | skipped | not-run (the sweep stopped first: nothing restored)
    status: str
    detail: str = ""

    @property
    def text(self) -> str:
        return f"{self.action}: {self.status}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True, slots=True)
class Board:
    cells: tuple[str, ...]
    rows: tuple[ConfigView, ...]
    measured: int  # cells with a record (valid or not)
    total: int  # cells of the configurations that can still run, and of those that ran
    current: str | None  # the configuration being worked on, or RESTORE during the last step
    steps: tuple[StepRecord, ...]  # the current configuration's (or the last step's), in order
    eta: Eta | None
    best: Best | None
    end: EndView | None = None


def fmt_tok_s(v: float) -> str:
    """Tokens/s in at most six columns: 987.6, 12,345, 123.4k."""
    if v < 1000:
        return f"{v:.1f}"
    if v < 100_000:
        return f"{v:,.0f}"
    return f"{v / 1000:.1f}k"


def fmt_duration(s: float) -> str:
    return duration(s, spoken=True)


def column_label(cell: str, repeats: bool) -> tuple[str, str]:
    """Two short lines for a matrix column: the workload (prompt/output tokens) and the concurrency (and the
    repeat, where the plan repeats cells)."""
    s = parse_cell_id(cell)
    if s is None:
        return cell, ""
    return f"{s.prompt_tokens}/{s.output_tokens}", f"c{s.concurrency}" + (f" r{s.repeat}" if repeats else "")


def config_state(live: LiveSweep, name: str) -> tuple[str, str]:
    rec = live.configs.get(name)
    if rec is not None:
        if rec.status == "failed":
            kind = rec.failure.kind if rec.failure is not None and rec.failure.kind else "unknown"
            return "failed", f"failed ({kind})"
        if rec.status in ("ready", "skipped"):
            return rec.status, rec.status
        return "pending", rec.status or "pending"
    if name == live.current and live.running and name in live.steps:
        return "running", "running"
    return "pending", "pending"


def board(live: LiveSweep, now: float) -> Board:
    cells = tuple(live.all_cells())
    configs = live.all_configs()
    best_of: dict[str, float] = {}
    for (_, cell), rec in live.cells.items():
        if rec.valid:
            best_of[cell] = max(best_of.get(cell, 0.0), rec.metrics.tok_s_total)
    rows: list[ConfigView] = []
    measured = total = 0
    for name in configs:
        state, status = config_state(live, name)
        running_cell = _running_cell(live, name, cells)
        views = []
        for cell in cells:
            got = live.cells.get((name, cell))
            if got is not None:
                measured += 1
                if got.valid:
                    v = got.metrics.tok_s_total
                    views.append(CellView(Mark.VALUE, fmt_tok_s(v), got, best=v > 0 and v >= best_of.get(cell, 0)))
                else:
                    views.append(CellView(Mark.INVALID, SYMBOL[Mark.INVALID], got))
            elif state in ("failed", "skipped"):
                views.append(CellView(Mark.NOT_RUN, SYMBOL[Mark.NOT_RUN]))
                continue
            elif cell == running_cell:
                views.append(CellView(Mark.RUNNING, SYMBOL[Mark.RUNNING]))
            else:
                views.append(CellView(Mark.PENDING, SYMBOL[Mark.PENDING]))
            total += 1
        rows.append(ConfigView(name, state, status, live.configs.get(name), tuple(views)))
    current = live.current
    steps = tuple(live.steps.get(current, {}).values()) if current else ()
    return Board(cells, tuple(rows), measured, total, current, steps, eta(live, now), best(live), end_view(live))


def end_view(live: LiveSweep) -> EndView:
    """The last step as its records say: the runner writes a `restore` step (running, then done, failed, or
    skipped when the deployment already runs the target, ready), after a `keep` step skipped when `--keep best`
    found no valid cell and falls back to the original flags."""
    steps = live.end_steps()
    main, keep = steps.get("restore"), steps.get("keep")
    mode = live.meta.keep if live.meta is not None else ""
    best = (mode == "best" or (not mode and main is not None and "best configuration" in main.detail)) \
        and not (keep is not None and keep.status == "skipped")
    action = "keep the best configuration" if best else "restore the original flags"
    status = live.meta.status if live.meta is not None else RUNNING
    if main is not None:
        if main.status == "running" and status != RUNNING:
            return EndView(action, "failed", f"the sweep ended ({status}) before it finished")
        return EndView(action, main.status, main.detail)
    if steps:
        return EndView(action, "running")
    if status == RUNNING:
        return EndView(action, "pending")
    if status == DONE:
        return EndView(action, "not-run", "no record of it")
    return EndView(action, "not-run", f"the sweep ended {status or 'early'} before it: nothing restored")


def _running_cell(live: LiveSweep, config: str, cells: tuple[str, ...]) -> str | None:
    """The cell being measured: the first one without a record of the current configuration once it is ready,
    while the sweep runs (no record says a cell started: the runner measures them in order)."""
    rec = live.configs.get(config)
    if not live.running or config != live.current or rec is None or rec.status != "ready":
        return None
    return next((c for c in cells if (config, c) not in live.cells), None)


def best(live: LiveSweep) -> Best | None:
    """The best configuration so far, by the rule summary.md states (`verdict`): None before a valid cell."""
    v = verdict((r for r in live.cells.values() if r.valid), live.all_configs())
    if v is None or v.best.tok_s <= 0:
        return None
    return Best(v.best.config, v.best.tok_s, v.concurrency, tuple((s.config, s.tok_s) for s in v.within))


def eta(live: LiveSweep, now: float) -> Eta | None:
    """The time left while the sweep runs: the cells left times the mean time a cell took (from one record to
    the next of a configuration, so warmup and the runner's own checks are in it), plus a bring-up for each
    configuration not ready yet, at the mean time the others took, less the time the current cell has run.
    None until a cell has been measured."""
    if not live.running:
        return None
    cells = live.all_cells()
    gaps: list[float] = []
    for name in live.all_configs():
        rec = live.configs.get(name)
        prev = rec.at if rec is not None and rec.status == "ready" else None
        for r in sorted((r for (c, _), r in live.cells.items() if c == name), key=lambda r: r.at):
            if prev is not None and r.at > prev:
                gaps.append(r.at - prev)
            prev = r.at
    if not gaps:
        durations = [r.metrics.duration_s for r in live.cells.values() if r.metrics.duration_s > 0]
        if not durations:
            return None
        gaps = durations
    mean_cell = fmean(gaps)
    cells_left = bringups_left = 0
    for name in live.all_configs():
        rec = live.configs.get(name)
        if rec is not None and rec.status in ("failed", "skipped"):
            continue
        cells_left += sum(1 for c in cells if (name, c) not in live.cells)
        if rec is None:
            bringups_left += 1
    ready = [r.ready_s for r in live.configs.values() if r.status == "ready" and r.ready_s]
    seconds = cells_left * mean_cell + bringups_left * (fmean(ready) if ready else 0.0)
    # the cell under way is part done: as long as the last record is, at most one cell's worth
    last = max([*(r.at for r in live.cells.values()), *(r.at for r in live.configs.values())], default=now)
    seconds -= min(max(0.0, now - last), mean_cell) if cells_left else 0.0
    return Eta(max(0.0, seconds), cells_left, mean_cell, bringups_left)
