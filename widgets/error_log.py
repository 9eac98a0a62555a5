"""The log panel: the server's errors (warnings, errors, whole tracebacks) or all its lines, filterable.

Lines are shown with Textual's `Log`, which renders plain text: a `[bold]` or `[/]` in a log line is displayed as
written, and escape codes were stripped before the line got here. The widget keeps its own bounded buffer
(widgets/log_buffer.py: the newest lines, and the errors apart) so the text filter searches all it has kept, not
just what is on screen. While the user has scrolled up, new lines do not move the view; the border counts them
instead.
"""

from __future__ import annotations

import math
import re
import textwrap
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Log, Static

from tui.lifecycle.lines import LineKind, sanitize
from tui.model import LogLine
from tui.words import noun
from widgets import log_buffer
from widgets.log_buffer import LogBuffer
from widgets.written import RESTORE_HINT, set_border, set_text

FILTER_IDLE = "/ filter   e errors or all lines   w wrap   End follow"
FILTER_EDITING = "filter: type, Enter to apply, Esc to clear"
#: how often the count of hidden lines (the note's and the border's) follows a busy log: every tick, it kept the
#: panel's border, and with it the whole panel, repainting every second
HIDDEN_COUNT_EVERY_S = 5.0
#: and the border's count, once lines are on view and the note is gone
HIDDEN_BORDER_EVERY_S = 30.0


#: the server's access-log lines for bringup's own polling (uvicorn: `INFO: 127.0.0.1:5123 - "GET /health HTTP/1.1"
#: 200 OK`), one or two a second: noise bringup itself makes, so "all lines" leaves them out unless a filter asks
_OWN_POLLING = re.compile(r'"GET /(?:health|health_generate|metrics|v1/models)(?:\?\S*)? HTTP/[\d.]+" 200')
_MARKER = "──── run "


class BurstLog(Log):
    """Textual's `Log`, whose End key follows the log again (`on_end`, the panel's), as `less +F` does. Textual's
    own End scrolled, with an animation, to where the end was when it was pressed: lines arriving meanwhile moved
    the end away, the view stopped short of it and never followed again."""

    def __init__(self, *, on_end: Callable[[], None], id: str | None = None, max_lines: int | None = None) -> None:
        super().__init__(id=id, max_lines=max_lines, auto_scroll=False)
        self._on_end = on_end

    def action_scroll_end(self) -> None:
        self._on_end()


def _count(n: int) -> str:
    return f"{n:,}"


class ErrorLog(Vertical):
    """The panel: the filter box, the note an empty view shows, and the lines.

    It opens on errors only: the server's warnings, errors and whole tracebacks, which are what an operator looks
    for, and which all lines (a busy server's `Decode batch` lines, many a second) scroll away. So that a bring-up
    without errors does not look dead for minutes, the border and the empty view's note count the lines the view
    leaves out and name the key that shows them (`e`); the lifecycle panel shows the latest progress line."""

    DEFAULT_CLASSES = "panel"
    #: Textual's maximize (the command palette's "Maximize", with the log focused) takes the whole panel, with its
    #: border, title and filter box, rather than the bare list of lines
    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries = LogBuffer(log_buffer.LINES, log_buffer.ERRORS)
        self.show_all = False
        self.filter_text = ""
        self.unseen = 0
        #: the view follows new lines until the user scrolls up; decided from the user's scrolling, not from the
        #: scroll position at append time, which a layout change (the filter box opening) moves off the end
        self.following = True
        self._run = ""
        self._due: list[str] = []
        self._due_overflowed = False
        #: long lines folded to the panel's width (a traceback's frames and messages are often wider than half a
        #: terminal); off by default: folding costs, and a burst of short lines needs none of it
        self.wrap = False
        self._wrapped_at = 0
        #: a line other than a run marker is on view: until then the "no errors so far" note says why it is empty
        self._content_shown = False
        #: lines in the buffer the view leaves out (counted as they arrive, recounted on a rebuild), and the count
        #: the border and the note show: they are redrawn on the refresh tick when it moved, not per batch
        self._hidden = 0
        #: the count of hidden lines the note and the border show, and when it was last brought up to date
        #: (`_update_title`), on `clock` (a test moves it)
        self._counted = 0
        self._counted_at = -math.inf
        self._border_counted = 0
        self._border_counted_at = -math.inf
        self.clock: Callable[[], float] = time.monotonic
        #: the panel fills the screen (Textual's maximize): the border says how to come back
        self.maximized = False

    def compose(self) -> ComposeResult:
        yield Input(placeholder=FILTER_IDLE, id="log-filter", disabled=True, compact=True)
        yield Static(id="log-empty")  # its words: _update_title, at mount
        yield BurstLog(id="log", max_lines=self.rows, on_end=self.follow)

    @property
    def rows(self) -> int:
        """The most rows the view ever keeps, folded lines included (Textual's `Log` drops its oldest past it);
        what it keeps at a given moment is `_row_limit()`."""
        return self.entries.bound

    def _row_limit(self) -> int:
        """The rows the view may hold now: no more than the buffer holds lines, unless folded (a line is then
        several rows, up to `rows`). With `rows` alone, Textual's Log kept 5,000 lines the buffer had dropped
        (LINES + ERRORS rows against LINES lines): a third more memory, still filling an hour into a console on a
        server that logs a few lines a second."""
        return self.rows if self.wrap else max(1, len(self.entries))

    @property
    def log_view(self) -> Log:
        return self.query_one("#log", Log)

    def _matches(self, text: str, is_error: bool) -> bool:
        if not self.show_all and not is_error:
            return False
        if not self.filter_text:
            return is_error or '"GET /' not in text or not _OWN_POLLING.search(text)
        return self.filter_text.lower() in text.lower()

    def ingest(self, lines: Iterable[LogLine], kinds: Iterable[LineKind]) -> None:
        """Keep lines as they arrive, in the engine's small batches, with the kind the engine gave each (the one
        classification, with the preset's fatal wordings: tui/lifecycle/lines.py), and queue those the view shows
        for the next `flush`: a step per batch, so a key pressed during a burst is not kept waiting. A marker goes
        where a new run begins (an older run's lines, read from its log when the console starts, must not read as
        the current run's); it shows in every view."""
        due = self._due
        hidden = 0
        for line, kind in zip(lines, kinds, strict=True):
            if line.invocation and line.invocation != self._run:
                self._run = line.invocation
                when = time.strftime("%H:%M:%S", time.localtime(line.at))
                marker = f"{_MARKER}{line.invocation[:8]} (first line {when}) ────"
                self.entries.append(marker, True)
                if self._matches(marker, True):
                    due.append(marker)
            text = sanitize(line.text)
            is_error = kind is not LineKind.PLAIN
            self.entries.append(text, is_error)
            if self._matches(text, is_error):
                due.append(text)
            else:
                hidden += 1
        self._hidden = min(self._hidden + hidden, len(self.entries))
        if len(due) > self.rows:  # paused for long: the next flush rebuilds from the buffer instead
            due.clear()
            self._due_overflowed = True

    @property
    def has_due(self) -> bool:
        return bool(self._due) or self._due_overflowed

    def flush(self) -> None:
        """Show the lines ingested since the last flush."""
        if self._due_overflowed:
            self.rebuild()
            return
        if not self._due:
            return
        new, self._due = self._due, []
        log = self.log_view
        if not self._content_shown:
            self._content_shown = any(not t.startswith(_MARKER) for t in new)
        if self.wrap:
            new = self._fold(new)
        at_end = self.following or log.max_scroll_y == 0
        log.max_lines = limit = self._row_limit()
        dropped = max(0, log.line_count + len(new) - limit)  # Log drops this many from the top, at max_lines
        full = dropped > 0
        y = log.scroll_y
        log.write_lines(new, scroll_end=False)
        if full and not at_end:
            # scrolled back while the buffer is full: the lines in view moved up by what was dropped; the view
            # moves with them, as `less` holds its place, instead of sliding down to the newest lines
            log.scroll_to(y=max(0.0, y - dropped), animate=False, immediate=True)
            log.refresh()
        if at_end:
            # scrolled here rather than by write_lines, which only follows when the view was at the end before,
            # and a layout change (the filter box opening) can have moved the end
            log.scroll_end(animate=False, immediate=True, x_axis=False)
            if full:
                # Textual's Log, once at max_lines, drops lines from the top but repaints only the rows past the
                # old end, and the scroll position no longer moves: without this the view freezes on old lines
                log.refresh()
        if not at_end:
            self.unseen += len(new)
        self._update_title()

    def _shown(self) -> tuple[list[int], list[str]]:
        """The lines of the buffer the view shows: their numbers in `entries`, and their text."""
        pairs = [(i, t) for i, t, e in self.entries.items() if self._matches(t, e)]
        return [i for i, _ in pairs], [t for _, t in pairs]

    def _rows_of(self, text: str, width: int) -> int:
        return len(self._fold_line(text, width)) if self.wrap else 1

    def _top_entry(self) -> int | None:
        """Where the view is, as the number in `entries` of the line at its top (numbers do not move when older
        lines are dropped); None when it follows the log (it keeps following) or the place cannot be told (the
        lines waiting for the screen overflowed). Counted from the newest line back to the top of the view: the
        Log may have dropped rows from its own top."""
        log = self.log_view
        if self.following or self._due_overflowed or log.line_count == 0:
            return None
        places, lines = self._shown()
        if self._due:  # ingested, not on screen yet: the last lines of the buffer
            places, lines = places[:-len(self._due)], lines[:-len(self._due)]
        below = log.line_count - round(log.scroll_y)  # rows from the top of the view to the end
        for k in range(len(lines) - 1, -1, -1):
            below -= self._rows_of(lines[k], self._wrapped_at)
            if below <= 0:
                return places[k]
        return places[0] if places else None

    def rebuild(self, top: int | None = None) -> None:
        """Redraw the view from the buffer. It follows the log, unless `top` (an entry's number in the buffer, from
        `_top_entry`) says which line to keep at the top: the first shown at or after it. Folded, only the newest
        lines that fill the Log's rows are folded (it would drop the older ones' rows anyway): folding is most of
        what a rebuild costs, a second and more for a full buffer of long lines."""
        self._due, self._due_overflowed = [], False
        log = self.log_view
        log.clear()
        places, shown = self._shown()
        self._hidden = len(self.entries) - len(shown)
        self._content_shown = any(not t.startswith(_MARKER) for t in shown)
        if self.wrap:
            width = self._fold_width()
            pieces: list[list[str]] = []
            total, first = 0, len(shown)
            while first > 0 and total < self.rows:
                first -= 1
                pieces.append(self._fold_line(shown[first], width))
                total += len(pieces[-1])
            places = places[first:]
            rows: list[str] = []
            starts: list[int] = []
            for piece in reversed(pieces):
                starts.append(len(rows))
                rows.extend(piece)
        else:
            rows, starts = shown, list(range(len(shown)))
        log.max_lines = self._row_limit()
        log.write_lines(rows, scroll_end=False)
        k = bisect_left(places, top) if top is not None else len(places)
        if k < len(places):
            y = max(0, starts[k] - max(0, len(rows) - self.rows))
            log.scroll_to(y=y, animate=False, immediate=True)
            self.following = y >= log.max_scroll_y
        else:
            self.following = True
            self.unseen = 0
            log.scroll_end(animate=False, immediate=True, x_axis=False)
            # and once more after the next layout: a view that was hidden (nothing matched) has no height yet
            log.scroll_end(animate=False, x_axis=False)
        self._update_title()

    def _fold_width(self) -> int:
        self._wrapped_at = max(20, self.log_view.scrollable_content_region.width or self.size.width or 80)
        return self._wrapped_at

    @staticmethod
    def _fold_line(text: str, width: int) -> list[str]:
        if len(text) <= width and (text.isascii() or cell_len(text) <= width):
            return [text]
        lead = text[:len(text) - len(text.lstrip())][:width // 2]
        return textwrap.wrap(text, width, subsequent_indent=lead + "↳ ", drop_whitespace=False,
                             replace_whitespace=False) or [text]

    def _fold(self, lines: list[str]) -> list[str]:
        """Each line longer than the view, cut at the view's width; the pieces after the first start with `↳`
        under the line's own indent, so a folded line does not read as the next one (a traceback's code lines are
        indented too). Display only: the filter still matches whole lines."""
        width = self._fold_width()
        out: list[str] = []
        for text in lines:
            out.extend(self._fold_line(text, width))
        return out

    def set_wrap(self, wrap: bool) -> None:
        top = self._top_entry()
        self.wrap = wrap
        self.rebuild(top)

    def on_resize(self) -> None:
        if self.wrap and self.log_view.scrollable_content_region.width != self._wrapped_at:
            self.rebuild(self._top_entry())

    def set_mode(self, show_all: bool) -> None:
        top = self._top_entry()
        self.show_all = show_all
        self.rebuild(top)

    def set_filter(self, text: str) -> None:
        if text == self.filter_text:
            return  # a rebuild redraws up to 15,000 lines: not for closing an empty filter box
        self.filter_text = text
        self.rebuild()  # the matches end at the newest: followed

    def follow(self) -> None:
        """Follow the log again, at once: the view goes to the newest line and stays there as lines arrive."""
        self.following = True
        self.log_view.scroll_end(animate=False, immediate=True, x_axis=False)
        self.unseen = 0
        self._update_title()

    def set_maximized(self, maximized: bool) -> None:
        self.maximized = maximized
        self._update_title()

    def matching(self) -> list[str]:
        return [t for t, e in self.entries if self._matches(t, e)]

    def _update_title(self, *, count_now: bool = True) -> None:
        """The note, the border's title and subtitle, each written only when its words changed: setting a border
        title repaints the whole panel, lines and all, and a note that keeps its height needs no layout.
        `count_now=False` (the tick, when only the count of hidden lines moved) leaves the count as it was until
        `HIDDEN_COUNT_EVERY_S` has passed: a busy server's count moves every second, and redrawing the panel every
        second for it was most of what the console wrote to the terminal."""
        empty = self.log_view.line_count == 0
        note = self.query_one("#log-empty", Static)
        note.display = not self._content_shown  # above the run markers, if there are any
        shown_again = not empty and not self.log_view.display
        self.log_view.display = not empty
        if shown_again and self.app.focused is None:
            # hidden while a filter matched nothing, the log lost the focus: give it back, or the arrow keys,
            # PgUp and Home scroll nothing once the filter is cleared
            self.log_view.focus()
        counted = self._to_count()
        now = self.clock()
        if (count_now or now - self._counted_at >= HIDDEN_COUNT_EVERY_S
                or bool(counted) != bool(self._counted)):  # a count appearing or going: at once
            self._counted_at, self._counted = now, counted
        hidden = _count(self._counted) if self._counted else ""
        if not self._content_shown:
            what = "lines match" if self.filter_text else "lines yet" if self.show_all else "errors or warnings so far"
            keys = f"e: {'errors only' if self.show_all else 'show all lines'}, /: filter"
            lines = noun(self._counted, "other line")
            set_text(note, Text(f"no {what}; {hidden} {lines} hidden  ({keys})" if hidden else f"no {what}  ({keys})"))
        # the border counts them too once lines are on view (the note is gone), more slowly: its words repaint the
        # whole panel, lines and all
        border = self._counted if self._content_shown else 0
        if (count_now or now - self._border_counted_at >= HIDDEN_BORDER_EVERY_S
                or bool(border) != bool(self._border_counted)):
            self._border_counted_at, self._border_counted = now, border
        mode = ("all lines" if self.show_all else "errors only") + (", wrapped" if self.wrap else "")
        flt = f" /{self.filter_text}" if self.filter_text else ""
        in_border = f" ({_count(self._border_counted)} hidden)" if self._border_counted else ""
        parts = [f"↓ {self.unseen} new (End to follow)" if self.unseen else "", RESTORE_HINT if self.maximized else ""]
        # plain text, not markup: the filter is what the user typed, `[/]` included
        set_border(self, title=f"Log: {mode}{flt}{in_border}", subtitle=" · ".join(p for p in parts if p))

    def _to_count(self) -> int:
        """The hidden lines to count: all lines leave out bringup's own polling only, which is not counted (e
        shows it no more than now)."""
        return self._hidden if self.filter_text or not self.show_all else 0

    def on_mount(self) -> None:
        self.watch(self.log_view, "scroll_y", self._scrolled, init=False)
        self._update_title()

    def _scrolled(self, old: float, new: float) -> None:
        log = self.log_view
        if new < old and new < log.max_scroll_y - 0.5:
            self.following = False  # the user scrolled up
        elif new >= log.max_scroll_y - 0.5:
            self.following = True

    def check_follow(self) -> None:
        """Called on the refresh tick: back at the end by scrolling means following again; the count of hidden
        lines is redrawn if it moved."""
        if self.unseen and self.log_view.is_vertical_scroll_end:
            self.unseen = 0
            self._update_title()
        elif self._to_count() != (self._border_counted if self._content_shown else self._counted):
            self._update_title(count_now=False)
