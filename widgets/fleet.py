"""The fleet overview's table: one row per deployment (host, phase and time in it, failure kind, GPU memory and
utilisation over its GPUs, tokens/s, a one-line note), sorted and filtered, with a cursor on one row.

Plain data in (`FleetRow`, built from a snapshot by `row_for`, widgets/fleet_rows.py), each line drawn as a Rich
`Text` assembled from pieces: names, hosts and notes come from the config and from servers, and are never parsed as
markup. The table draws its lines itself (Textual's line API) and redraws only the lines whose text changed: with
sixteen deployments, a second's tick repaints the rows whose clock or figures moved, not the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.model import Phase
from widgets.fleet_rows import FleetRow, SortKey, fmt_duration, order

# ---------------------------------------------------------------------------------------------------- the text


def _gib(mib: float) -> str:
    gib = mib / 1024
    return f"{gib:.1f}" if gib < 10 else f"{gib:.0f}"


#: the note, last on the line, keeps at least this much: "STALLED 4m10s: no log …", "another bringup is at …"
NOTE_MIN = 22
#: the columns that give way when a line is short of room, the least telling first (one with nothing to show in
#: any row goes before any of these); then the name and host are cut, then the host goes; the name, the phase and
#: the note always stay
GIVE_WAY = ("util", "age", "mem", "tps", "failure")
#: the narrowest a name or host is cut to (with an ellipsis) when even that is not enough
NAME_MIN = 8
AGE_W = 6  # 10m59s


@dataclass(frozen=True, slots=True)
class Columns:
    """Column widths (0: left out), the room between them, and the note's: the rest of the line. The name, host,
    phase and failure as wide as their widest cell, the figures as their widest value, so that padding is not what
    takes the note's room."""

    name: int
    host: int
    phase: int = 5
    age: int = AGE_W
    failure: int = 7
    mem: int = 7
    util: int = 4
    tps: int = 5
    gap: int = 2
    note: int = 0

    @classmethod
    def fit(cls, rows: Sequence[FleetRow], width: int = 0) -> Columns:
        """The columns for `rows` in `width` cells (0: not laid out yet: every column). Room is given by priority:
        a column with nothing to show gives way first, then the gaps narrow to one cell, then the columns in
        GIVE_WAY's order, then the host and name are cut, then the host goes, so that the note keeps NOTE_MIN
        cells."""
        widths = {
            "name": min(28, max([4, *(len(r.name) for r in rows)])),
            "host": min(20, max([4, *(len(r.host) for r in rows)])),
            "phase": max([5, *(len(r.phase_label) for r in rows)]),
            "age": AGE_W if any(r.since is not None and not r.host_down for r in rows) else 0,
            "failure": max([7, *(len(r.failure) for r in rows)]) if any(r.failure for r in rows) else 0,
            "mem": max([7, *(len(_mem(r)) for r in rows)]) if any(r.mem_used_mib is not None for r in rows) else 0,
            "util": 4 if any(r.util_pct is not None for r in rows) else 0,
            "tps": max([5, *(len(_tps(r)) for r in rows)]) if any(r.tokens_per_s is not None for r in rows) else 0,
        }
        full = {**widths, "age": AGE_W, "failure": widths["failure"] or 7, "mem": widths["mem"] or 7,
                "util": 4, "tps": widths["tps"] or 5}  # every column, each at least as wide as its header
        if not width:
            return cls(**full)

        def used(ws: dict[str, int], gap: int) -> int:
            return sum(w + gap for w in ws.values() if w)

        room = width - NOTE_MIN
        cols, gap = dict(full), 2
        if used(cols, gap) > room:
            cols = dict(widths)  # those with nothing to show give way
        if used(cols, gap) > room:
            gap = 1
        for key in GIVE_WAY:
            if used(cols, gap) <= room:
                break
            cols[key] = 0
        for key in ("host", "name"):  # cut, with an ellipsis, down to NAME_MIN
            over = used(cols, gap) - room
            if over > 0:
                cols[key] = max(min(NAME_MIN, cols[key]), cols[key] - over)
        if used(cols, gap) > room:
            cols["host"] = 0
        return cls(**cols, gap=gap, note=max(0, width - used(cols, gap)))


Piece = tuple[str, str]
"""(text, role): the role names a component class of the table (its colour comes from the theme, app.tcss)."""
Line = tuple[Piece, ...]


def _cell(text: str, width: int, right: bool = False, gap: int = 2) -> str:
    text = text if len(text) <= width else text[: width - 1] + "…"
    return (text.rjust(width) if right else text.ljust(width)) + " " * gap


def _mem(row: FleetRow) -> str:
    if row.mem_used_mib is None:
        return "-"
    return _gib(row.mem_used_mib) + (f"/{_gib(row.mem_total_mib)}G" if row.mem_total_mib else "G")


def _tps(row: FleetRow) -> str:
    return f"{row.tokens_per_s:.0f}" if row.tokens_per_s is not None else "-"


def _pieces(cols: Columns, cells: dict[str, Piece]) -> Line:
    """The present columns' cells, in order, each padded to its width; then the note's piece."""
    right = {"age", "mem", "util", "tps"}
    out: list[Piece] = []
    widths = (("name", cols.name), ("host", cols.host), ("phase", cols.phase), ("age", cols.age),
              ("failure", cols.failure), ("mem", cols.mem), ("util", cols.util), ("tps", cols.tps))
    for key, width in widths:
        if width:
            text, role = cells[key]
            out.append((_cell(text, width, key in right, cols.gap), role))
    out.append(cells["note"])
    return tuple(out)


def header_line(cols: Columns) -> Line:
    cells = {"name": "NAME", "host": "HOST", "phase": "PHASE", "age": "AGE", "failure": "FAILURE", "mem": "GPU MEM",
             "util": "UTIL", "tps": "TOK/S", "note": "NOTE"}
    return (("".join(t for t, _ in _pieces(cols, {k: (v, "") for k, v in cells.items()})), "header"),)


def _phase_role(row: FleetRow) -> str:
    if row.host_down or row.phase == Phase.FAILED:
        return "bad"
    if row.stalled or row.phase in (Phase.UNKNOWN, Phase.STOPPING, Phase.WARMUP):
        return "warn"
    if row.phase == Phase.READY:
        return "good"
    return "busy" if row.phase != Phase.STOPPED else "muted"


def line_for(row: FleetRow, cols: Columns, now: float) -> Line:
    """One row's pieces as of `now`: equal lines draw the same, so only rows whose text moved are redrawn."""
    age = fmt_duration(now - row.since, row.phase) if row.since is not None and not row.host_down else "-"
    util = f"{row.util_pct:.0f}%" if row.util_pct is not None else "-"
    figures = "muted" if row.gpus_stale or row.host_down else ""
    note_role = "bad" if row.host_down else "warn" if row.note else ""
    return _pieces(cols, {
        "name": (row.name, "name"), "host": (row.host, ""),
        "phase": (row.phase_label.upper() if row.host_down or row.stalled else row.phase_label, _phase_role(row)),
        "age": (age, ""), "failure": (row.failure or "-", "bad" if row.failure else ""), "mem": (_mem(row), figures),
        "util": (util, figures), "tps": (_tps(row), ""), "note": (row.note.replace("\n", " "), note_role)})


# ---------------------------------------------------------------------------------------------------- the widget


class FleetTable(ScrollView, can_focus=True):
    """The header stays on the first line; rows scroll under it; the cursor stays on its deployment when the rows
    are sorted again, filtered or updated. A filter that hides the chosen row puts the cursor on the first row
    shown for as long as it hides it: cleared (Esc), the cursor is back on the row chosen before, unless another
    one was chosen meanwhile (the keys act on the row under the cursor: it must not move by itself)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "fleet--header", "fleet--cursor", "fleet--name", "fleet--good", "fleet--busy", "fleet--warn", "fleet--bad",
        "fleet--muted"}
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("home", "move(-1000000)", "First", show=False),
        Binding("end", "move(1000000)", "Last", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("enter", "choose", "Open", show=False),
    ]

    class Chosen(Message):
        """Enter on a row: open that deployment."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: dict[str, FleetRow] = {}
        self.sort_key: SortKey = "name"
        self.reverse = False
        self.filter_text = ""
        #: the deployments shown, in order, and each one's line as last drawn
        self.shown: list[str] = []
        self.lines: list[Line] = []
        self.cursor: str | None = None
        #: the row the operator chose (with the cursor keys; at first, the first row): the cursor's place whenever
        #: it is shown
        self.chosen: str | None = None
        self.cols = Columns(4, 4)
        #: the rows redrawn by the last update (tests read it: an unchanged row is not redrawn)
        self.redrawn: tuple[str, ...] = ()
        self._now = 0.0
        self._strips: dict[tuple[Line, bool, int], Strip] = {}
        self._styles: dict[str, Style] = {}

    # ------------------------------------------------------------------ data in

    def show(self, rows: Iterable[FleetRow], now: float) -> None:
        self.rows = {r.name: r for r in rows}
        self._now = now
        self._lay_out()

    def set_sort(self, key: SortKey) -> None:
        """Sort by `key`; asked again for the same key, the order reverses (as k9s does)."""
        self.reverse = not self.reverse if key == self.sort_key else False
        self.sort_key = key
        self._lay_out()

    def set_filter(self, text: str) -> None:
        if text != self.filter_text:
            self.filter_text = text
            self._lay_out()

    @property
    def selected(self) -> FleetRow | None:
        return self.rows.get(self.cursor) if self.cursor in self.shown else None

    def plain(self) -> str:
        return "\n".join("".join(t for t, _ in line) for line in [header_line(self.cols), *self.lines])

    # ------------------------------------------------------------------ layout: what changed

    def _lay_out(self) -> None:
        ordered = order(self.rows.values(), self.sort_key, self.reverse, self.filter_text)
        cols = Columns.fit(list(self.rows.values()), self.scrollable_content_region.width)
        names = [r.name for r in ordered]
        lines = [line_for(r, cols, self._now) for r in ordered]
        if self.chosen not in self.rows:  # none yet, or gone from the config's rows
            self.chosen = names[0] if names else None
        if self.chosen in names:
            self.cursor = self.chosen
        elif self.cursor not in names:
            self.cursor = names[0] if names else None
        size = Size(0, len(lines) + 1)  # no sideways scrolling: the note, last, ends in an ellipsis
        if names == self.shown and cols == self.cols and size == self.virtual_size:
            changed = [i for i, (was, now) in enumerate(zip(self.lines, lines, strict=True)) if was != now]
            self.lines = lines
            self.redrawn = tuple(names[i] for i in changed)
            for i in changed:
                self._refresh_row(i)
        else:
            self.shown, self.lines, self.cols = names, lines, cols
            self.redrawn = tuple(names)
            self.virtual_size = size
            self.refresh()
        self._strips = {k: s for k, s in self._strips.items() if k[0] in set(lines)}
        self._keep_cursor_in_view()

    def _refresh_row(self, i: int) -> None:
        y = i + 1 - int(self.scroll_offset.y)  # the header is line 0 of the viewport
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # ------------------------------------------------------------------ the cursor

    def _index(self) -> int:
        return self.shown.index(self.cursor) if self.cursor in self.shown else -1

    def action_move(self, by: int) -> None:
        if not self.shown:
            return
        was = self._index()
        i = max(0, min(len(self.shown) - 1, was + by))
        if i == was:
            return
        self.cursor = self.chosen = self.shown[i]
        self._refresh_row(was)
        self._refresh_row(i)
        self._keep_cursor_in_view()

    def action_page(self, by: int) -> None:
        self.action_move(by * max(1, self.size.height - 2))

    def action_choose(self) -> None:
        if self.selected is not None:
            self.post_message(self.Chosen(self.selected.name))

    def _keep_cursor_in_view(self) -> None:
        i = self._index()
        rows = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if i < 0:
            return
        if i < top:
            self.scroll_to(y=i, animate=False)
        elif i >= top + rows:
            self.scroll_to(y=i - rows + 1, animate=False)

    # ------------------------------------------------------------------ drawing

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda: self._forget_styles(), init=False)

    def on_resize(self) -> None:
        """The columns fit the width: a new width can give the note room, or take a column away."""
        if self.rows:
            self._lay_out()

    def _forget_styles(self) -> None:
        self._styles.clear()
        self._strips.clear()
        self.refresh()

    def _style(self, role: str) -> Style:
        style = self._styles.get(role)
        if style is None:
            style = self.get_component_rich_style(f"fleet--{role}", partial=True) if role else Style()
            self._styles[role] = style
        return style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._styles.clear()  # the theme's colours, read once per frame, not once per line
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_y = int(self.scroll_offset.y)
        if y == 0:
            line, selected = header_line(self.cols), False
        else:
            i = y - 1 + scroll_y
            if i >= len(self.lines):
                return Strip.blank(width, self.rich_style)
            line, selected = self.lines[i], self.shown[i] == self.cursor
        key = (line, selected, width)
        strip = self._strips.get(key)
        if strip is None:
            base = self.rich_style + (self._style("cursor") if selected else Style())
            text = Text(style=base, no_wrap=True, overflow="ellipsis", end="")
            for piece, role in line:
                text.append(piece, self._style(role))  # appended as plain text: never markup
            text.truncate(width, overflow="ellipsis", pad=True)
            strip = Strip(list(text.render(self.app.console))).crop(0, width)
            self._strips[key] = strip
        return strip
