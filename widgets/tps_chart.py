"""The throughput chart: plotext's picture, repainted by the cells that changed.

A PlotextPlot repaints itself whole: every row of the chart written to the terminal each time its line moves, a few
kilobytes a redraw. Most rows of a chart (the axes, the labels, the empty sky above a steady line) do not change from
one redraw to the next; this one keeps the picture it drew and marks dirty only the cells that differ. Imported with
the first samples (plotext is tens of milliseconds of imports the console's first frame need not wait for).
"""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip

from widgets.cells import repaint_rows, row_strip, segment_rows
from widgets.plot import Plot


class TpsChart(Plot):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: the picture as drawn, and the size and theme it was drawn for
        self._rows: list[list[Segment]] = []
        self._drawn_for: tuple[int, int, str] | None = None

    def _picture(self) -> list[list[Segment]]:
        rendered = self.render()  # plotext's figure at this size and theme, as PlotextPlot draws it
        text = rendered if isinstance(rendered, Text) else Text(str(rendered))
        self._drawn_for = (self.size.width, self.size.height, self.app.theme)
        return segment_rows(text.split("\n", allow_blank=True), self)

    def redraw(self) -> None:
        """Show what was plotted since the last redraw: the changed cells, or all of it at a new size or theme."""
        if not self.is_mounted or self._drawn_for != (self.size.width, self.size.height, self.app.theme):
            self._drawn_for = None
            self.refresh()
            return
        old, self._rows = self._rows, self._picture()
        if not repaint_rows(self, old, self._rows):
            self.refresh()

    def render_line(self, y: int) -> Strip:
        if self._drawn_for != (self.size.width, self.size.height, self.app.theme):
            self._rows = self._picture()
        return row_strip(self._rows, y, self.size.width, self.rich_style)
