"""The console's header: the title line that keeps its last part where the terminal is narrow.

Textual's Header centres "bringup — name @ host  target  release  [read-only]  esc: all deployments" and cuts it at
both edges: at 80 columns the read-only mark and the way back to the overview were lost. Here the line is fitted
to the room first: the app's name goes, then the middle parts (the unit, the release) are shortened, so the first
part (which deployment, where) and the last one (the mode, the way back) stay whole. Pure `fit_title`, so a test
can fit one without an app.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.content import Content
from textual.css.query import NoMatches
from textual.widgets import Header
from textual.widgets._header import HeaderTitle

#: the sub-title's parts are separated by two spaces (tui/console/viewer.py)
SEP = "  "
ELLIPSIS = "…"


def _cut(text: str, width: int) -> str:
    """`text` shortened to `width` cells, its end replaced by an ellipsis."""
    if cell_len(text) <= width:
        return text
    while text and cell_len(text) + 1 > width:
        text = text[:-1]
    return text + ELLIPSIS if width > 0 else ""


def fit_title(title: str, sub_title: str, width: int) -> tuple[str, str]:
    """(title, sub-title) that fit `width` cells together ("title — sub"): the title dropped first, then the middle
    parts of the sub-title shortened in order; the first part and the last are kept whole
    where they fit at all."""
    if cell_len(f"{title} — {sub_title}" if sub_title else title) <= width or not sub_title:
        return title, sub_title
    parts = [p for p in sub_title.split(SEP) if p]
    if cell_len(SEP.join(parts)) <= width:
        return "", SEP.join(parts)
    middle = range(1, len(parts) - 1)  # the unit first, the mark of the mode last
    for i in middle:
        over = cell_len(SEP.join(parts)) - width
        if over <= 0:
            break
        parts[i] = _cut(parts[i], max(1, cell_len(parts[i]) - over))
    parts = [p for p in parts if p != ELLIPSIS] if cell_len(SEP.join(parts)) > width else parts
    line = SEP.join(parts)
    if cell_len(line) > width and len(parts) > 1:  # still too wide: the first part gives way, the last stays
        last = parts[-1]
        line = _cut(SEP.join(parts[:-1]), max(1, width - cell_len(last) - len(SEP))) + SEP + last
    return "", _cut(line, width)


class ConsoleHeader(Header):
    """Textual's Header, its line fitted to the room it has (`fit_title`), again on every resize."""

    def format_title(self) -> Content:
        try:
            width = self.query_one(HeaderTitle).content_region.width
        except NoMatches:  # not composed yet: the whole line, fitted at the first resize
            width = 0
        title, sub = self.screen_title, self.screen_sub_title
        if width > 0:
            title, sub = fit_title(title, sub, width)
        if not title:
            return Content(sub).stylize("dim")
        return self.app.format_title(title, sub)

    def on_resize(self, _: events.Resize) -> None:
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        self.query_one(HeaderTitle).update(self.format_title())
