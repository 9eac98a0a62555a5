"""The sweep view: the configurations x cells matrix filling in as results arrive, the current configuration's
restart steps, the ETA and the best so far, the selected cell's figures (or why it is invalid, or why its
configuration failed), and the two charts of one workload.

It renders plain data (a `LiveSweep`, folded by its screen from the results directory) and does no I/O. Every text
that comes from the files (configuration names, flag values, log excerpts, reasons) goes into rich `Text` as plain
text, never as markup: a flag value like `[8]` or an excerpt's `[rank0]:` would otherwise be read as a style tag
(or raise). The matrix is a DataTable updated cell by cell (only the cells whose text changed); the charts are
redrawn only when a cell record arrived, the workload shown changed or the widget was resized.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from tui.sweep.board import Board, CellView, ConfigView, Mark, board, column_label, fmt_duration, fmt_tok_s
from tui.sweep.charts import draw_pareto, draw_throughput, pareto_points, throughput_series, workloads
from tui.sweep.live import LiveSweep
from tui.sweep.results import RESTORE, CellRecord, ConfigRecord, StepRecord
from tui.words import plural
from widgets.plot import Plot
from widgets.written import set_text

NAME_COL, STATUS_COL = "_config", "_status"
STATE_STYLE = {"ready": "green", "failed": "bold red", "running": "bold cyan", "skipped": "dim", "pending": "dim",
               "done": "green", "not-run": "dim"}
STEP_MARK = {"done": ("✓", "green"), "running": ("…", "bold cyan"), "failed": ("✗", "bold red"),
             "skipped": ("-", "dim")}


@dataclass(frozen=True, slots=True)
class Selected:
    """What the cursor is on: a configuration (its name or status column) or one of its cells."""

    config: str
    cell: str | None


def cell_text(c: CellView) -> Text:
    """Right-aligned, as the column labels are; the best of its column in bold green, `!` after a value with
    failed requests."""
    if c.mark == Mark.VALUE:
        t = Text(c.text, style="bold green" if c.best else "", justify="right")
        if c.failed_requests:
            t.append("!", style="bold yellow")
        return t
    style = {Mark.INVALID: "bold red", Mark.RUNNING: "bold cyan", Mark.PENDING: "dim"}.get(c.mark, "dim")
    return Text(c.text, style=style, justify="right")


def head_text(b: Board, live: LiveSweep, now: float) -> Text:
    """Where the sweep stands, in two lines: its state, progress and ETA; the best so far."""
    t = Text()
    meta = live.meta
    if meta is not None:
        t.append("sweep of ")
        t.append(meta.deployment, style="bold")
        t.append(f" @ {meta.host}  ")
        t.append(meta.status or "?", style="bold cyan" if live.running else "bold")
        if meta.started_at:
            end = meta.finished_at or now
            t.append(f"  {fmt_duration(end - meta.started_at)}", style="dim")
    else:
        t.append("sweep (sweep.json not written yet)", style="dim")
    t.append(f"  {b.measured}/{plural(b.total, 'cell')}")
    if b.eta is not None:
        t.append("  ETA ")
        t.append(time.strftime("%H:%M", time.localtime(now + b.eta.seconds)), style="bold")
        t.append(f" (in {fmt_duration(b.eta.seconds)}: {plural(b.eta.cells_left, 'cell')} x "
                 f"{fmt_duration(b.eta.mean_cell_s)}", style="dim")
        if b.eta.bringups_left:
            t.append(f" + {plural(b.eta.bringups_left, 'bring-up')}", style="dim")
        t.append(")", style="dim")
    elif live.running:
        t.append("  ETA after the first cell", style="dim")
    so_far = " so far" if live.running else ""
    if b.best is None:
        t.append(f"\nbest{so_far}: none yet", style="dim")
    elif b.best.clear:
        t.append(f"\nbest{so_far}: ", style="dim")
        t.append(b.best.config, style="bold green")
        t.append(f"  {b.best.figures}", style="dim")
    else:  # a lead inside the configurations' own spread is no best: summary.md's rule (tui/sweep/summary.py)
        t.append(f"\nno clear best (within spread){so_far}: ", style="yellow")
        t.append(b.best.figures, style="dim")
    if b.end is not None and b.rows:  # the sweep's last step, after every configuration: not one of them
        t.append("   end: ", style="dim")
        t.append(f"{b.end.action}: ")
        t.append(b.end.status, style=STATE_STYLE.get(b.end.status, ""))
    return t


def steps_text(config: str | None, steps: tuple[StepRecord, ...], state: str) -> Text:
    """The current configuration's restart steps, one row: `lock ✓  stop ✓  release … 12 GiB still held`."""
    t = Text()
    if config is None:
        t.append("no configuration started yet", style="dim")
        return t
    t.append(config, style="bold")
    t.append(f" ({state})" if state else "", style=STATE_STYLE.get(state, ""))
    t.append(": ")
    if not steps:
        t.append("no restart step yet", style="dim")
    for s in steps:
        mark, style = STEP_MARK.get(s.status, ("?", "dim"))
        t.append(f"{s.name} ")
        t.append(mark, style=style)
        if s.detail and s.status in ("running", "failed"):
            t.append(f" {s.detail}", style="dim" if s.status == "running" else "red")
        t.append("  ")
    t.rstrip()
    return t


def config_detail(name: str, rec: ConfigRecord | None, status: str) -> Text:
    t = Text()
    t.append(name, style="bold")
    t.append(f"  {status}", style=STATE_STYLE.get(status.split()[0], ""))
    if rec is None:
        return t
    if rec.ready_s is not None:
        t.append(f"  ready in {fmt_duration(rec.ready_s)}", style="dim")
    if rec.attempts > 1:
        t.append(f"  {plural(rec.attempts, 'attempt')}", style="dim")
    if rec.flags:
        t.append("\nflags: ", style="dim")
        t.append("  ".join(f"--{k}" if v is True else f"--{k} {v}" if v is not None else f"(no --{k})"
                           for k, v in rec.flags.items()))
    f = rec.failure
    if f is not None:
        t.append(f"\nfailed in {f.phase or '?'}: {f.kind or 'unknown'}", style="bold red")
        for line in f.excerpt[-3:]:
            t.append(f"\n| {line}", style="red")
        if f.hint:
            t.append("\nhint: ", style="bold")
            t.append(f.hint)
    return t


def cell_detail(config: str, cell: str, view: CellView) -> Text:
    t = Text()
    t.append(f"{config}", style="bold")
    t.append(f"  {cell}  ")
    rec: CellRecord | None = view.record
    if rec is None:
        t.append({Mark.RUNNING: "being measured", Mark.PENDING: "not measured yet",
                  Mark.NOT_RUN: "not measured: its configuration did not come up"}.get(view.mark, ""), style="dim")
        return t
    if not rec.valid:
        t.append("✗ invalid: ", style="bold red")
        t.append(rec.reason or "no reason given")
        t.append(f"  (attempt {rec.attempt})", style="dim")
        return t
    m = rec.metrics
    t.append(f"{fmt_tok_s(m.tok_s_total)} tok/s", style="bold")
    if m.tok_s_user is not None:
        t.append(f"  {fmt_tok_s(m.tok_s_user)}/user")
    if m.tok_s_gpu is not None:
        t.append(f"  {fmt_tok_s(m.tok_s_gpu)}/GPU")
    t.append(f"  {m.req_s:.2f} req/s  {plural(m.completed, 'request')}")
    if m.failed:
        t.append(f"  {m.failed} failed", style="bold yellow")
    lat = []
    for label, s in (("TTFT", m.ttft_ms), ("TPOT", m.tpot_ms), ("E2E", m.e2el_ms)):
        if s.p50 is not None:
            lat.append(f"{label} p50 {s.p50:.0f} p99 {s.p99:.0f} ms" if s.p99 is not None else
                       f"{label} p50 {s.p50:.0f} ms")
    if lat:
        t.append("\n" + "   ".join(lat), style="dim")
    if m.accept_len is not None:
        t.append(f"\naccept length {m.accept_len:.2f}", style="cyan")
        if m.accept_rate is not None:
            t.append(f"  rate {m.accept_rate:.2f}", style="cyan")
    elif m.accept_note:
        t.append(f"\n{m.accept_note}", style="dim")
    return t


class SweepCharts(Horizontal):
    """The two charts side by side; maximizable (g), as they are not focusable."""

    ALLOW_MAXIMIZE = True


class SweepView(Vertical):
    """The sweep: `show(live, now)` with the latest state; it redraws what changed."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.live = LiveSweep()
        self.board: Board | None = None
        self.workload = 0  # which workload's charts are shown (an index into workloads(live))
        self._columns: tuple[str, ...] | None = None
        self._rows: list[str] = []
        self._shown: dict[tuple[str, str], Text] = {}
        self._charted: tuple[int, int, tuple[int, int] | None, tuple[int, int]] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="sweep-head")
        yield Static(id="sweep-steps")
        table: DataTable[Text] = DataTable(id="sweep-matrix", cursor_type="cell", header_height=2, zebra_stripes=False)
        table.fixed_columns = 2
        yield table
        yield Static(id="sweep-detail")
        with SweepCharts(id="sweep-charts"):
            yield Plot(id="sweep-tps")
            yield Plot(id="sweep-pareto")

    # ------------------------------------------------------------------ drawing

    def show(self, live: LiveSweep, now: float) -> None:
        self.live = live
        b = self.board = board(live, now)
        set_text(self.query_one("#sweep-head", Static), head_text(b, live, now))
        current = next((r for r in b.rows if r.name == b.current), None)
        if b.current == RESTORE and b.end is not None:
            steps = steps_text(b.end.action, b.steps, b.end.status)
        else:
            steps = steps_text(b.current, b.steps, current.state if current else "")
        set_text(self.query_one("#sweep-steps", Static), steps)
        self._table(b)
        self._detail()
        self._charts()

    def _table(self, b: Board) -> None:
        table: DataTable[Text] = self.query_one("#sweep-matrix", DataTable)
        if b.cells != self._columns:
            table.clear(columns=True)
            self._columns, self._rows, self._shown = b.cells, [], {}
            repeats = len({c.rsplit("-r", 1)[0] for c in b.cells}) < len(b.cells)
            table.add_column(Text("configuration\n"), key=NAME_COL)
            table.add_column(Text("status\n"), key=STATUS_COL)
            for c in b.cells:
                top, sub = column_label(c, repeats)
                table.add_column(Text(f"{top}\n{sub}", justify="right"), key=c)
        for row in b.rows:
            texts = {NAME_COL: Text(row.name, style="bold" if row.name == b.current else ""),
                     STATUS_COL: Text(row.status, style=STATE_STYLE.get(row.state, ""))}
            for c, cv in zip(b.cells, row.cells, strict=True):
                texts[c] = cell_text(cv)
            if row.name not in self._rows:
                self._rows.append(row.name)
                table.add_row(*texts.values(), key=row.name)
                self._shown.update({(row.name, k): v for k, v in texts.items()})
                continue
            for k, v in texts.items():
                old = self._shown.get((row.name, k))
                if old is None or old.plain != v.plain or old.style != v.style or old.spans != v.spans:
                    self._shown[(row.name, k)] = v
                    table.update_cell(row.name, k, v)

    def selected(self) -> Selected | None:
        table: DataTable[Text] = self.query_one("#sweep-matrix", DataTable)
        if not self._rows or self._columns is None:
            return None
        coord: Coordinate = table.cursor_coordinate
        if not table.is_valid_coordinate(coord):
            return None
        row = self._rows[coord.row] if coord.row < len(self._rows) else None
        if row is None:
            return None
        cells = self._columns
        col = coord.column - 2
        return Selected(row, cells[col] if 0 <= col < len(cells) else None)

    def _detail(self) -> None:
        sel, b = self.selected(), self.board
        t = Text()
        if sel is not None and b is not None:
            row = next((r for r in b.rows if r.name == sel.config), None)
            if row is not None and sel.cell is None:
                t = config_detail(row.name, row.record, row.status)
            elif row is not None and sel.cell in b.cells:
                t = cell_detail(row.name, sel.cell, row.cells[b.cells.index(sel.cell)])
        if not t:
            t = Text("arrows: select a cell for its figures, or a configuration for its flags and failure",
                     style="dim")
        set_text(self.query_one("#sweep-detail", Static), t)

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        event.stop()
        self._detail()

    def next_workload(self) -> None:
        n = len(workloads(self.live))
        if n:
            self.workload = (self.workload + 1) % n
            self._charts()

    def on_resize(self) -> None:
        self._charted = None
        self._charts()

    def _charts(self) -> None:
        """Both charts of the workload chosen (`c`: the next one), redrawn when a cell came in, the choice
        changed or the size did."""
        loads = workloads(self.live)
        wl = loads[self.workload % len(loads)] if loads else None
        tps, pareto = self.query_one("#sweep-tps", Plot), self.query_one("#sweep-pareto", Plot)
        key = (id(self.live), self.live.cells_version, wl, (tps.size.width, tps.size.height))
        if key == self._charted:
            return
        self._charted = key
        configs = self.live.all_configs()
        if wl is None:
            for p in (tps, pareto):
                p.plt.clear_data()
                p.plt.clear_figure()
                p.plt.title("no cell measured yet")
                p.refresh()
            return
        draw_throughput(tps.plt, throughput_series(self.live, wl), wl, configs=configs)
        draw_pareto(pareto.plt, pareto_points(self.live, wl), f"{wl[0]}/{wl[1]}", configs=configs)
        tps.refresh()
        pareto.refresh()

    def rows_for(self) -> list[ConfigView]:
        """The matrix rows as last shown (for tests and the screen)."""
        return list(self.board.rows) if self.board is not None else []
