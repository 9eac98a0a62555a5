"""Text repainted by the cells that changed, as curses does, not by the line or the widget.

Textual writes to the terminal every cell of the regions a widget marks dirty: a Static's `update` marks the whole
widget, the line API's `refresh_line` a whole line. A console left open all day on a ready server changes a few
figures a second (a clock, a power reading, tokens/s), and writing whole lines for them was most of what it sent
down the SSH link. Here a widget compares the line it drew with the line it will draw and marks dirty only the runs
of cells that differ. Rich and Textual have no such diff (Textual's compositor diffs nothing; it renders what is
marked), so it is written here, over Textual's public `Strip` and `Widget.refresh(region)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

#: unchanged cells between two changed runs below which the runs are one: moving the cursor over them costs about as
#: many bytes as writing them
GAP = 8

#: a cell's text and its style (a Rich Style, or whatever names one: the GPU panel's rows carry style names)
Cell = tuple[str, object]
#: a row as drawn: (text, style) pieces, a Strip's Segments included (their third field is not looked at)
Pieces = Sequence[tuple[str, object] | Segment]


def cells(pieces: Pieces) -> list[Cell]:
    """One (text, style) per cell: a wide character takes its cells, the second one empty."""
    out: list[Cell] = []
    for piece in pieces:
        text, style = piece[0], piece[1]
        for ch in text:
            w = cell_len(ch)
            if w == 1:
                out.append((ch, style))
            elif w > 1:
                out.append((ch, style))
                out.extend(("", style) for _ in range(w - 1))
            elif out:  # a combining mark belongs to the cell before it
                prev, prev_style = out[-1]
                out[-1] = (prev + ch, prev_style)
    return out


def changed_runs(old: Pieces, new: Pieces, gap: int = GAP) -> list[tuple[int, int]]:
    """The runs of cells, [start, end), where `new` differs from `old` (segments, as in a Strip); runs fewer than
    `gap` cells apart are merged. A line that got longer or shorter differs in the cells only one of them has."""
    a, b = cells(old), cells(new)
    runs: list[tuple[int, int]] = []
    start = -1
    for x in range(max(len(a), len(b))):
        same = x < len(a) and x < len(b) and a[x] == b[x]
        if not same and start < 0:
            start = x
        elif same and start >= 0:
            runs.append((start, x))
            start = -1
    if start >= 0:
        runs.append((start, max(len(a), len(b))))
    merged: list[tuple[int, int]] = []
    for run in runs:
        if merged and run[0] - merged[-1][1] < gap:
            merged[-1] = (merged[-1][0], run[1])
        else:
            merged.append(run)
    return merged


def refresh_changed(widget: Widget, y: int, old: Pieces, new: Pieces, x_offset: int = 0) -> None:
    """Mark dirty the cells of row `y` (of the widget's content) that differ between `old` and `new`: one region,
    from the first changed cell to the last. Textual writes a dirty region of a widget's row from the widget's left
    edge to the region's end (its compositor cuts rows at widget edges only), so two regions in a row would write the
    row's start twice; one region costs what its last run alone does."""
    runs = changed_runs(old, new)
    if runs:
        x0, x1 = runs[0][0], runs[-1][1]
        widget.refresh(Region(x0 - x_offset, y, x1 - x0, 1))


def segment_rows(lines: Iterable[Text], widget: Widget) -> list[list[Segment]]:
    """One row of segments per line (each already cut to the widget's width), the widget's style not applied."""
    rows = []
    for line in lines:
        line.end = ""
        rows.append(list(line.render(widget.app.console)))
    return rows


def repaint_rows(widget: Widget, old: Sequence[Pieces], new: Sequence[Pieces]) -> bool:
    """Mark dirty the cells of `new` that differ from `old`; False (nothing marked) when the number of rows
    differs, and the caller repaints (or lays out) the whole widget."""
    if len(old) != len(new):
        return False
    for y, (was, now) in enumerate(zip(old, new, strict=True)):
        if was != now:
            refresh_changed(widget, y, was, now)
    return True


def row_strip(rows: Sequence[list[Segment]], y: int, width: int, base: Style) -> Strip:
    """Row `y` as drawn: cut or padded to `width`, over the widget's own style."""
    if y >= len(rows):
        return Strip.blank(width, base)
    # pieces of one style written as one segment: each segment is written with its whole style, then a reset
    return Strip(rows[y]).crop_extend(0, width, None).apply_style(base).simplify()


class TextLines(Widget):
    """What a Static shows (Rich Text, wrapped at the width, never read as markup), drawn through the line API so
    that a new text repaints only the cells that changed. For text updated every second: a phase's clock, the
    throughput figures."""

    DEFAULT_CSS = "TextLines { height: auto; }"

    def __init__(self, text: Text | str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._text = text if isinstance(text, Text) else Text(text)
        #: the text wrapped at `_width`, one list of segments per row, the widget's own style not applied
        self._rows: list[list[Segment]] = []
        self._width = -1

    @property
    def plain(self) -> str:
        return self._text.plain

    def render(self) -> Text:
        """The whole text (what a test or a plain dump reads); drawing goes through `render_line`."""
        return self._text

    def _wrap(self, width: int) -> list[list[Segment]]:
        if width <= 0:
            return []
        # the Text's own no_wrap and overflow ("ellipsis" for one row a step), else folded as a Static does; the
        # space a line was wrapped at is not drawn (as a Static does not)
        lines = self._text.wrap(self.app.console, width)
        for line in lines:
            line.rstrip()
        return segment_rows(lines, self)

    def _rows_at(self, width: int) -> list[list[Segment]]:
        if width != self._width:
            self._rows, self._width = self._wrap(width), width
        return self._rows

    def update(self, text: Text | str) -> None:
        """Show `text`: nothing is repainted if it did not change, only the changed cells if it has as many rows,
        and the layout is asked for only when the number of rows changed."""
        new = text if isinstance(text, Text) else Text(text)
        if new.plain == self._text.plain and new.spans == self._text.spans and new.style == self._text.style:
            return
        self._text = new
        width = self.content_region.width if self.is_mounted else 0
        if width <= 0 or self._width != width:
            self._width = -1
            self.refresh(layout=True)
            return
        old, self._rows = self._rows, self._wrap(width)
        if not repaint_rows(self, old, self._rows):
            self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._rows_at(width))

    def on_resize(self) -> None:
        self._width = -1
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        return row_strip(self._rows_at(width), y, width, self.rich_style)
