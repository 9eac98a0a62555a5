"""One row per GPU under a header: memory bar and numbers (GiB), utilization, temperature, power and a short memory
history. The deployment's GPUs are marked (the border's subtitle says what the mark means).

Colours say what is wrong, not what is normal for an inference server: memory is judged against the server's own
budget (SGLang's --mem-fraction-static, vLLM's --gpu-memory-utilization), so a GPU at its budget is not warned and only
memory above it (or nearly full) is warned; a GPU outside the deployment holding memory gets a note of its own; a
hot GPU and power at its cap are coloured. Columns fit the width: the bar and the history grow with it, and at
narrow widths the least telling column goes (the history, then the temperature) instead of a value being cut.
Missing values show as `-`, a lost GPU as LOST with its error, memory held by processes other than the current
server (the previous run still releasing, or another tenant) is called out.

The panel draws its rows itself (Textual's line API) from plain segments: it is redrawn at every GPU sample, and
going through Rich `Text` and Textual's text layout cost about four times as much per frame (measured with
`benchmarks/console_cost.py`); a row whose numbers did not change keeps its strip.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.lifecycle.nodes import describe_gpus, describe_pid, gpu_label, host_names, split_gpu
from tui.lifecycle.presets.telemetry import MemoryBudget
from tui.model import Attribution, GpuSample, GpuSnapshot, NamedHolder
from widgets.cells import refresh_changed
from widgets.written import RESTORE_HINT, set_border

SPARK = "▁▂▃▄▅▆▇█"
_PLAIN = Style()
_S = {name: Style.parse(name) for name in ("bold", "dim", "cyan", "green", "yellow", "red", "magenta", "bold yellow",
                                            "bold red")}

Row = tuple[tuple[str, str], ...]
"""A row as (text, style name) pieces: comparable, so an unchanged row keeps its strip."""

#: marks the deployment's GPUs (the border's subtitle says so)
MARK = "●"
LEGEND = f"{MARK} this deployment's GPUs"

#: memory the server uses beyond its budget as a matter of course (activations, CUDA graphs, the CUDA context and
#: NCCL buffers live outside SGLang's static fraction): a GPU up to budget + this is normal
HEADROOM = 0.05
#: this full is worth a warning whatever the budget (the next allocation may fail); and with no budget known
#: (not a server we know), memory is called high from WARN_UNKNOWN
FULL = 0.98
WARN_UNKNOWN = 0.95
#: memory on a GPU outside the deployment worth a note (a CUDA context alone is about 0.5 GiB)
OUTSIDE_MIB = 1024.0
#: temperatures (°C) worth a colour: data-centre GPUs slow down around 87-90 °C
TEMP_WARN = 83.0
TEMP_HOT = 90.0
#: power at this share of the GPU's limit is at its cap (it throttles its clocks to stay there)
POWER_CAP = 0.97

#: the narrowest memory bar, and the memory history's narrowest and widest sparkline (one sample a cell)
BAR_MIN = 4
BAR_MAX = 60
SPARK_MIN = 8
SPARK_MAX = 60
#: the fixed columns: " 100%", " 61°C"
UTIL_W = 5
TEMP_W = 5


def memory_budget(argv: Sequence[str], server: MemoryBudget | str | None) -> float | None:
    """The share of each GPU's memory the server is told to take (the last of its flag in `argv`, else its
    default), or None for a server whose budget flag is not known. `server`: the flag and its default, as the
    server's preset gives them (`Preset.memory_budget`), or a registered preset's name."""
    if isinstance(server, str):
        from tui.lifecycle.presets.registry import PRESETS

        preset = PRESETS.get(server)
        server = preset.memory_budget if preset is not None else None
    return server.share(argv) if server is not None else None


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


def memory_level(frac: float, budget: float | None) -> str:
    """`ok`, `over` (above the server's budget and its usual headroom, or high with no budget known) or `full`."""
    if frac >= FULL:
        return "full"
    return "over" if frac > (budget + HEADROOM if budget is not None else WARN_UNKNOWN) else "ok"


@dataclass(frozen=True, slots=True)
class Columns:
    """Which columns a width holds, and how wide the growing ones are (0: left out)."""

    index: int
    bar: int
    memory: int
    temp: bool
    power: int
    power_cap: bool
    history: int

    @property
    def width(self) -> int:
        return (self.index + self.bar + self.memory + UTIL_W + (TEMP_W if self.temp else 0) + self.power
                + (1 + self.history if self.history else 0))


def _mem_text(g: GpuSample) -> str:
    if g.mem_used_mib is None or not g.mem_total_mib:
        return " -/- GiB"
    return f" {g.mem_used_mib / 1024:5.1f}/{g.mem_total_mib / 1024:.0f} GiB"


def _power_text(g: GpuSample, cap: bool) -> str:
    if cap and g.power_limit_w and g.power_w is not None:
        return f" {g.power_w:.0f}/{g.power_limit_w:.0f} W"
    return f" {_n(g.power_w, '.0f')} W"


def columns(gpus: Sequence[GpuSample], width: int) -> Columns:
    """Fit the columns to `width`: the GPU, its memory in numbers, utilization and power always (a row too narrow
    even for them is cut); then, as room allows, a memory bar, the temperature, the memory history and the power
    limit; what is left grows the bar and the history. The least telling column goes first: the history, then the
    temperature (a hot GPU is still named in a note), then the bar."""
    live = [g for g in gpus if not g.lost]
    index = 2 + max((len(str(split_gpu(g.index)[1])) for g in gpus), default=1) + 1  # "● 0 "
    memory = max((len(_mem_text(g)) for g in live), default=8)
    power = max([len(" power"), *(len(_power_text(g, False)) for g in live)])
    power_cap = max([len(" power"), *(len(_power_text(g, True)) for g in live)])
    has_cap = any(g.power_limit_w for g in live)
    rest = width - (index + memory + UTIL_W + power)
    bar_w = BAR_MIN if rest >= BAR_MIN else 0
    rest -= bar_w
    temp = bar_w > 0 and rest >= TEMP_W
    rest -= TEMP_W if temp else 0
    hist = SPARK_MIN if temp and rest >= 1 + SPARK_MIN else 0
    rest -= 1 + hist if hist else 0
    cap = hist > 0 and has_cap and rest >= power_cap - power
    if cap:
        rest, power = rest - (power_cap - power), power_cap
    if hist:  # the rest: a third to the bar, two to the history, each up to its widest; then the bar takes what
        more = min(SPARK_MAX - hist, rest * 2 // 3)  # the history could not
        hist, rest = hist + more, rest - more
    if bar_w:
        bar_w += max(0, min(BAR_MAX - bar_w, rest))
    return Columns(index, bar_w, memory, temp, power, cap, hist)


def _header(c: Columns, budget: float | None) -> Row:
    mem = "memory"
    if budget is not None and len(f"{mem}, budget {budget:.0%}") <= c.bar + c.memory:
        mem += f", budget {budget:.0%}"
    text = "GPU".ljust(c.index) + mem.ljust(c.bar + c.memory) + " util".rjust(UTIL_W)
    text += " temp".rjust(TEMP_W) if c.temp else ""
    text += " power".rjust(c.power)
    if c.history:
        text += " " + ("memory history" if c.history >= 14 else "history").ljust(c.history)
    return ((text.rstrip(), "dim"),)


def rows_for(snap: GpuSnapshot | None, history: Mapping[int, Sequence[float]], gpus: Sequence[int],
             server_pid: int, releasing: bool, width: int, attribution: Attribution | None = None,
             budget: float | None = None, holders: Sequence[NamedHolder] = ()) -> list[Row]:
    """The panel's rows, plain data: what a snapshot test or a plain-text dump can read without a terminal.

    `gpus` are the deployment's (marked); `budget` is the share of memory the server is told to take
    (`memory_budget`): memory up to it (and its usual headroom) is how a serving GPU looks, and is not called out.
    Colours say what is wrong: memory above the budget or nearly full, a hot GPU, power at its cap; memory held
    on a GPU outside the deployment is a note of its own. `holders`: memory other deployments on the host hold
    (`held_by_neighbours`), named after them: on the deployment's own GPUs in red (its next start may not fit),
    outside them in the outside colour."""
    if snap is None:
        return _note("waiting for the first GPU sample…", "dim", width)
    if snap.error and not snap.gpus:
        return _note(snap.error, "yellow", width)
    rows: list[Row] = []
    mine = set(gpus)
    a = attribution
    names = host_names(snap.gpus)  # a deployment over several nodes: GPUs grouped by host, named host:index
    if a is not None and a.previous_mib > 0:
        rows += _note(f"previous run still holds {a.previous_mib / 1024:.1f} GiB on GPU "
                      f"{describe_gpus(a.previous_gpus, names)}",
                      "bold yellow", width)
    elif releasing:  # no process tree known: during the release wait every process here is the old run's
        old = [p for p in snap.processes if p.gpu_index in mine and p.pid != server_pid]
        held = sum(p.used_mib or 0 for p in old) / 1024
        pids = ",".join(sorted({describe_pid(p.pid, names) for p in old})[:3])
        rows += _note(f"releasing: {held:.1f} GiB still held by the previous run"
                      + (f" (pid {pids})" if pids else ""), "bold yellow", width)
    c = columns(snap.gpus, width)
    if snap.gpus:
        rows.append(_header(c, budget))
    over: list[int] = []
    full: list[int] = []
    outside: dict[int, float] = {}
    hot: list[str] = []
    digits = c.index - 3
    host = ""
    for g in snap.gpus:
        row: list[tuple[str, str]] = []
        if g.host and g.host != host:
            host = g.host
            rows.append(((f"  {host}", "bold"),))
        ours = g.index in mine or not mine
        local = split_gpu(g.index)[1]
        row.append((f"{MARK if g.index in mine else ' '} {local:>{digits}} ", "bold" if ours else "dim"))
        if g.lost:
            row.append((f"LOST {g.error or 'GPU lost'}", "bold red"))
            rows.append(tuple(row))
            continue
        mem_style = ""
        if g.mem_used_mib is not None and g.mem_total_mib:
            frac = g.mem_used_mib / g.mem_total_mib
            level = memory_level(frac, budget) if ours else "outside" if g.mem_used_mib >= OUTSIDE_MIB else "idle"
            if level == "outside":
                outside[g.index] = g.mem_used_mib
            elif level == "over":
                over.append(g.index)
            elif level == "full":
                full.append(g.index)
            bar_style = {"ok": "green", "over": "yellow", "full": "bold red", "outside": "magenta",
                         "idle": "dim"}[level]
            mem_style = {"over": "yellow", "full": "bold red", "outside": "magenta"}.get(level, "")
            if c.bar:
                filled = bar(frac, c.bar).rstrip()
                row.append((filled, bar_style))
                row.append(("░" * (c.bar - len(filled)), "dim"))
        elif c.bar:
            row.append((" " * c.bar, ""))
        row.append((_mem_text(g).rjust(c.memory), mem_style))
        row.append((f" {_n(g.util_pct, '.0f')}%".rjust(UTIL_W), "" if ours else "dim"))
        temp_style = "" if g.temp_c is None or g.temp_c < TEMP_WARN else "yellow" if g.temp_c < TEMP_HOT \
            else "bold red"
        if c.temp:
            row.append((f" {_n(g.temp_c, '.0f')}°C".rjust(TEMP_W), temp_style or "dim"))
        elif temp_style:
            hot.append(f"GPU {gpu_label(g)} {g.temp_c:.0f}°C")
        capped = g.power_w is not None and bool(g.power_limit_w) and g.power_w >= POWER_CAP * (g.power_limit_w or 0)
        row.append((_power_text(g, c.power_cap).rjust(c.power), "yellow" if capped else "dim"))
        if c.history:
            line = spark(history.get(g.index, ()), c.history, g.mem_total_mib)
            row.append((" " + line.rjust(c.history), "cyan" if ours else "dim"))
        rows.append(tuple(row))
    if over:
        what = f"the server's budget ({budget:.0%}) and headroom" if budget is not None else f"{WARN_UNKNOWN:.0%}"
        rows += _note(f"memory above {what} on GPU {describe_gpus(over, names)}", "yellow", width)
    if full:
        rows += _note(f"memory nearly full ({FULL:.0%}+) on GPU {describe_gpus(full, names)}", "bold red", width)
    ours_all = {g.index for g in snap.gpus if g.index in mine or not mine}
    named_ours = 0.0
    for h in holders:  # another deployment of the host on this one's GPUs: a conflict, named
        on = [i for i in h.gpus if i in ours_all]
        if on:
            named_ours += h.mib_on(on)
            rows += _note(f"GPU {describe_gpus(on, names)}: {h.mib_on(on) / 1024:.1f} GiB {h.describe()}",
                          "bold red", width)
    for h in holders:
        on = [i for i in h.gpus if i in outside]
        if on:
            rows += _note(f"GPU {describe_gpus(on, names)}, outside the deployment: "
                          f"{sum(outside.pop(i) for i in on) / 1024:.1f} GiB {h.describe()}", "magenta", width)
    if outside:
        rows += _note(f"GPU {describe_gpus(outside, names)}, outside the deployment: "
                      f"{sum(outside.values()) / 1024:.1f} GiB held by other processes", "magenta", width)
    if hot:
        rows += _note("hot: " + ", ".join(hot), "yellow", width)
    other = a.other_mib - named_ours if a is not None else 0.0
    if a is not None and other > 1e-6 and not a.note:  # less what the named ones hold (float sums)
        rows += _note(f"other processes: {other / 1024:.1f} GiB", "yellow", width)
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
        #: the legend is shown (a GPU of the deployment is on view), and the panel fills the screen (Esc restores)
        self._legend = False
        self.maximized = False
        self._shown: tuple[GpuSnapshot | None, Mapping[int, Sequence[float]], Sequence[int], int, bool,
                           Attribution | None, float | None, Sequence[NamedHolder]] = (
            None, {}, [], 0, False, None, None, ())

    def show(self, snap: GpuSnapshot | None, history: Mapping[int, Sequence[float]], gpus: Sequence[int],
             server_pid: int = 0, releasing: bool = False, attribution: Attribution | None = None,
             budget: float | None = None, holders: Sequence[NamedHolder] = ()) -> None:
        """`budget`: the share of GPU memory the server is told to take (`memory_budget`), None if not known;
        `holders`: the memory other deployments on the host hold, named (`rows_for`)."""
        self._shown = (snap, history, gpus, server_pid, releasing, attribution, budget, holders)
        width = self.scrollable_content_region.width  # less the scrollbar, when there is one
        rows = rows_for(snap, history, gpus, server_pid, releasing, max(30, width), attribution, budget, holders)
        marked = snap is not None and any(g.index in set(gpus) for g in snap.gpus)
        self._legend = marked
        self._set_subtitle()
        size = Size(width, len(rows))
        if rows == self.rows and self.virtual_size == size:
            return
        old, self.rows = self.rows, rows
        keep = set(rows)
        self._strips = {k: s for k, s in self._strips.items() if k[0] in keep}
        if self.virtual_size == size and len(old) == len(rows):
            # only the cells whose numbers moved: a frame then writes those, not the panel's rows
            scroll_x, scroll_y = self.scroll_offset
            for i, (was, now) in enumerate(zip(old, rows, strict=True)):  # same size, same count
                if was != now:
                    refresh_changed(self, i - scroll_y, was, now, x_offset=scroll_x)
            return
        self.virtual_size = size
        self.refresh()

    def set_maximized(self, maximized: bool) -> None:
        self.maximized = maximized
        self._set_subtitle()

    def _set_subtitle(self) -> None:
        """The legend of the marks, when a GPU of the deployment is shown; how to come back, when maximized."""
        parts = (LEGEND if self._legend else "", RESTORE_HINT if self.maximized else "")
        set_border(self, subtitle=" · ".join(p for p in parts if p))

    def on_resize(self) -> None:
        """Notes wrap and bars fit the width: a new size means new rows."""
        self.show(*self._shown)

    def watch_show_vertical_scrollbar(self) -> None:
        """More rows than the panel's height: the scrollbar takes a column, and the rows are fitted to what is
        left (or they would lose their last character to an ellipsis)."""
        self.call_after_refresh(lambda: self.show(*self._shown))

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
            # pieces of one style as one segment, and no empty ones: each segment is written with its whole style
            strip = Strip([Segment(text, self._base + _S[style] if style else self._base)
                           for text, style in self.rows[i] if text]).simplify()
            if strip.cell_length - scroll_x > width:  # ellipsis, like `overflow: ellipsis` for text
                strip = strip.crop(scroll_x, scroll_x + width - 1).extend_cell_length(width - 1)
                strip = Strip.join([strip, Strip([Segment("…", self._base)])])
            else:
                strip = strip.crop_extend(scroll_x, scroll_x + width, self._base)
            self._strips[key] = strip
        return strip
