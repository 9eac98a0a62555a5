"""One row per GPU: memory bar and numbers, utilization, temperature, power and a short memory history.

Missing values show as `-`, a lost GPU as LOST with its error, memory held by processes other than the current
server (the previous run still releasing, or another tenant) is called out.

The panel draws its rows itself (Textual's line API) from plain segments: it is redrawn at every GPU sample, and
going through Rich `Text` and Textual's text layout cost about four times as much per frame (measured with
`benchmarks/console_cost.py`); a row whose numbers did not change keeps its strip.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.lifecycle.release import ranges
from tui.model import Attribution, GpuSnapshot

SPARK = "▁▂▃▄▅▆▇█"
_PLAIN = Style()
_S = {name: Style.parse(name) for name in ("bold", "dim", "cyan", "green", "yellow", "red", "bold yellow",
                                            "bold red")}

Row = tuple[tuple[str, str], ...]
"""A row as (text, style name) pieces: comparable, so an unchanged row keeps its strip."""


def spark(values: Sequence[float], width: int, top: float | None = None) -> str:
    vals = list(values)[-width:]
    if not vals:
        return ""
    hi = top if top else max(vals) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, max(0, int(v / hi * (len(SPARK) - 1) + 0.5)))] for v in vals)


def bar(frac: float, width: int) -> str:
    frac = min(1.0, max(0.0, frac))
    full = int(frac * width)
    part = " ▏▎▍▌▋▊▉"[int((frac * width - full) * 8)] if full < width else ""
    return ("█" * full + part).ljust(width)


def _n(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _note(text: str, style: str, width: int) -> list[Row]:
    """A note wraps (it is read once and matters); GPU rows are cut with an ellipsis (they are scanned)."""
    return [((line, style),) for line in textwrap.wrap(text, max(10, width)) or [""]]


def rows_for(snap: GpuSnapshot | None, history: Mapping[int, Sequence[float]], gpus: Sequence[int],
             server_pid: int, releasing: bool, width: int, attribution: Attribution | None = None) -> list[Row]:
    """The panel's rows, plain data: what a snapshot test or a plain-text dump can read without a terminal."""
    if snap is None:
        return _note("waiting for the first GPU sample…", "dim", width)
    if snap.error and not snap.gpus:
        return _note(snap.error, "yellow", width)
    rows: list[Row] = []
    mine = set(gpus)
    a = attribution
    if a is not None and a.previous_mib > 0:
        rows += _note(f"previous run still holds {a.previous_mib / 1024:.1f} GiB on GPU {ranges(a.previous_gpus)}",
                      "bold yellow", width)
    elif releasing:  # no process tree known: during the release wait every process here is the old run's
        old = [p for p in snap.processes if p.gpu_index in mine and p.pid != server_pid]
        held = sum(p.used_mib or 0 for p in old) / 1024
        pids = ",".join(sorted({str(p.pid) for p in old})[:3])
        rows += _note(f"releasing: {held:.1f} GiB still held by the previous run"
                      + (f" (pid {pids})" if pids else ""), "bold yellow", width)
    spark_w = max(0, min(12, width - 46))
    bar_w = max(6, min(20, width - 34 - spark_w))
    for g in snap.gpus:
        row: list[tuple[str, str]] = []
        mark = "▸" if g.index in mine else " "
        row.append((f"{mark}{g.index:>2} ", "bold" if g.index in mine else "dim"))
        if g.lost:
            row.append((f"LOST {g.error or 'GPU lost'}", "bold red"))
            rows.append(tuple(row))
            continue
        if g.mem_used_mib is not None and g.mem_total_mib:
            frac = g.mem_used_mib / g.mem_total_mib
            filled = bar(frac, bar_w).rstrip()
            row.append((filled, "red" if frac > 0.95 else "yellow" if frac > 0.85 else "green"))
            row.append(("░" * (bar_w - len(filled)), "dim"))
            row.append((f" {g.mem_used_mib / 1024:5.1f}/{g.mem_total_mib / 1024:.0f}G", ""))
        else:
            row.append((" " * bar_w + "     -/-  ", ""))
        row.append((f" {_n(g.util_pct, '3.0f'):>3}%", "bold" if (g.util_pct or 0) > 50 else ""))
        row.append((f" {_n(g.temp_c, '.0f'):>3}°C {_n(g.power_w, '.0f'):>4}W", "dim"))
        if spark_w:
            row.append((" " + spark(history.get(g.index, ()), spark_w, g.mem_total_mib), "cyan"))
        rows.append(tuple(row))
    if a is not None and a.other_mib > 0 and not a.note:
        rows += _note(f"other processes: {a.other_mib / 1024:.1f} GiB", "yellow", width)
    if a is not None and a.note:
        rows += _note(a.note, "dim", width)
    if snap.error:
        rows += _note(snap.error, "yellow", width)
    return rows


class GpuPanel(ScrollView):
    DEFAULT_CLASSES = "panel"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[Row] = rows_for(None, {}, [], 0, False, 80)
        self._strips: dict[tuple[Row, int, int, Style], Strip] = {}
        self._base = _PLAIN
        self._shown: tuple[GpuSnapshot | None, Mapping[int, Sequence[float]], Sequence[int], int, bool,
                           Attribution | None] = (None, {}, [], 0, False, None)

    def show(self, snap: GpuSnapshot | None, history: Mapping[int, Sequence[float]], gpus: Sequence[int],
             server_pid: int = 0, releasing: bool = False, attribution: Attribution | None = None) -> None:
        self._shown = (snap, history, gpus, server_pid, releasing, attribution)
        width = self.scrollable_content_region.width  # less the scrollbar, when there is one
        rows = rows_for(snap, history, gpus, server_pid, releasing, max(30, width), attribution)
        size = Size(width, len(rows))
        if rows == self.rows and self.virtual_size == size:
            return
        old, self.rows = self.rows, rows
        keep = set(rows)
        self._strips = {k: s for k, s in self._strips.items() if k[0] in keep}
        if self.virtual_size == size and len(old) == len(rows):
            # only the rows whose numbers moved: a frame then renders those lines, not the panel's whole height
            for i, (was, now) in enumerate(zip(old, rows, strict=True)):  # same size, same count
                if was != now:
                    self.refresh_line(i)
            return
        self.virtual_size = size
        self.refresh()

    def on_resize(self) -> None:
        """Notes wrap and bars fit the width: a new size means new rows."""
        self.show(*self._shown)

    def plain(self) -> str:
        return "\n".join("".join(text for text, _ in row) for row in self.rows)

    def render_lines(self, crop: Region) -> list[Strip]:
        self._base = self.rich_style  # walks the DOM: once per frame, not once per row
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        i = y + scroll_y
        if i >= len(self.rows):
            return Strip.blank(width, self._base)
        key = (self.rows[i], width, scroll_x, self._base)
        strip = self._strips.get(key)
        if strip is None:
            strip = Strip([Segment(text, self._base + _S[style] if style else self._base)
                           for text, style in self.rows[i]])
            if strip.cell_length - scroll_x > width:  # ellipsis, like `overflow: ellipsis` for text
                strip = strip.crop(scroll_x, scroll_x + width - 1).extend_cell_length(width - 1)
                strip = Strip.join([strip, Strip([Segment("…", self._base)])])
            else:
                strip = strip.crop_extend(scroll_x, scroll_x + width, self._base)
            self._strips[key] = strip
        return strip
