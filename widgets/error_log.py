"""The log panel: the server's errors (warnings, errors, whole tracebacks) or all its lines, filterable.

Lines are shown with Textual's `Log`, which renders plain text: a `[bold]` or `[/]` in a log line is displayed as
written, and escape codes were stripped before the line got here. The widget keeps its own bounded buffer so
the text filter searches everything it has seen, not just what is on screen. While the user has scrolled up,
new lines do not move the view; the border counts them instead.
"""

from __future__ import annotations

import re
import textwrap
import time
from collections import deque
from collections.abc import Iterable

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Log, Static

from tui.lifecycle.lines import TROUBLE_WORDS, clean, continues_block, is_error_line, is_warning_line, sanitize
from tui.model import LogLine

BUFFER = 50_000
FILTER_IDLE = "/ filter   e errors or all lines   w wrap   End follow"
FILTER_EDITING = "filter: type, Enter to apply, Esc to clear"


#: the server's access-log lines for bringup's own polling (uvicorn: `INFO: 127.0.0.1:5123 - "GET /health HTTP/1.1"
#: 200 OK`), one or two a second: noise bringup itself makes, so "all lines" leaves them out unless a filter asks
_OWN_POLLING = re.compile(r'"GET /(?:health|health_generate|metrics|v1/models)(?:\?\S*)? HTTP/[\d.]+" 200')
_MARKER = "──── run "


class LogClassifier:
    """Marks the lines the errors view keeps: error-ish lines and every line of a traceback that follows one."""

    def __init__(self) -> None:
        self._in_block = False

    def __call__(self, raw: str) -> bool:
        # the level words are among the trouble words: a line with none of them, outside a block, is not one (the
        # cheap test first: most lines of a busy log stop here)
        if not self._in_block and not any(w in raw for w in TROUBLE_WORDS):
            return False
        c = clean(raw)
        if is_error_line(c) or is_warning_line(c):  # the reducer's own definition, plus warnings
            self._in_block = True
            return True
        if self._in_block and continues_block(c):
            return True
        self._in_block = False
        return False


class BurstLog(Log):
    """Textual's `Log`, measuring the width of new lines in the event loop, cheaply. `Log` measures every new line
    with Rich's cell_len in a thread worker started per write: during a 20,000 lines/s burst that was a sixth of the
    console's CPU. A line that is ASCII without tabs (nearly all server output) is as wide as it is long."""

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if lines:
            width = max(len(t) if t.isascii() and "\t" not in t else cell_len(self._process_line(t)) for t in lines)
            self._update_maximum_width(updates, width)


class ErrorLog(Vertical):
    DEFAULT_CLASSES = "panel"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: deque[tuple[str, bool]] = deque(maxlen=BUFFER)
        self.show_all = False
        self.filter_text = ""
        self.unseen = 0
        #: the view follows new lines until the user scrolls up; decided from the user's scrolling, not from the
        #: scroll position at append time, which a layout change (the filter box opening) moves off the end
        self.following = True
        self._run = ""
        self._classify = LogClassifier()
        self._due: list[str] = []
        self._due_overflowed = False
        #: long lines folded to the panel's width (a traceback's frames and messages are often wider than half a
        #: terminal); off by default: folding costs, and a burst of short lines needs none of it
        self.wrap = False
        self._wrapped_at = 0
        #: a line other than a run marker is on view: until then the "no errors so far" note says why it is empty
        self._content_shown = False

    def compose(self) -> ComposeResult:
        yield Input(placeholder=FILTER_IDLE, id="log-filter", disabled=True, compact=True)
        yield Static("no errors or warnings so far  (e: show all lines)", id="log-empty")
        yield BurstLog(id="log", max_lines=BUFFER, auto_scroll=False)

    @property
    def log_view(self) -> Log:
        return self.query_one("#log", Log)

    def _matches(self, text: str, is_error: bool) -> bool:
        if not self.show_all and not is_error:
            return False
        if not self.filter_text:
            return is_error or '"GET /' not in text or not _OWN_POLLING.search(text)
        return self.filter_text.lower() in text.lower()

    def ingest(self, lines: Iterable[LogLine]) -> None:
        """Keep and classify lines as they arrive, in the engine's small batches, and queue those the view shows
        for the next `flush`. Classifying at flush time instead made one step of 2,000 lines in a burst, and a
        key pressed meanwhile waited for it. A marker goes where a new run begins (an older run's lines, read
        from its log when the console starts, must not read as the current run's); it shows in every view."""
        due = self._due
        for line in lines:
            if line.invocation and line.invocation != self._run:
                self._run = line.invocation
                when = time.strftime("%H:%M:%S", time.localtime(line.at))
                marker = f"{_MARKER}{line.invocation[:8]} (first line {when}) ────"
                self.entries.append((marker, True))
                if self._matches(marker, True):
                    due.append(marker)
            text = sanitize(line.text)
            is_error = self._classify(text)
            self.entries.append((text, is_error))
            if self._matches(text, is_error):
                due.append(text)
        if len(due) > BUFFER:  # paused for long: the next flush rebuilds from the buffer instead
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
        full = log.line_count + len(new) > BUFFER
        log.write_lines(new, scroll_end=False)
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

    def rebuild(self) -> None:
        self._due, self._due_overflowed = [], False
        log = self.log_view
        log.clear()
        shown = [t for t, e in self.entries if self._matches(t, e)]
        self._content_shown = any(not t.startswith(_MARKER) for t in shown)
        log.write_lines(self._fold(shown) if self.wrap else shown, scroll_end=True)
        self.unseen = 0
        self._update_title()

    def _fold(self, lines: list[str]) -> list[str]:
        """Each line longer than the view, cut at the view's width; the pieces after the first start with `↳`
        under the line's own indent, so a folded line does not read as the next one (a traceback's code lines are
        indented too). Display only: the filter still matches whole lines."""
        width = max(20, self.log_view.scrollable_content_region.width or self.size.width or 80)
        self._wrapped_at = width
        out: list[str] = []
        for text in lines:
            if len(text) <= width and (text.isascii() or cell_len(text) <= width):
                out.append(text)
                continue
            lead = text[:len(text) - len(text.lstrip())][:width // 2]
            out.extend(textwrap.wrap(text, width, subsequent_indent=lead + "↳ ", drop_whitespace=False,
                                     replace_whitespace=False) or [text])
        return out

    def set_wrap(self, wrap: bool) -> None:
        self.wrap = wrap
        self.rebuild()

    def on_resize(self) -> None:
        if self.wrap and self.log_view.scrollable_content_region.width != self._wrapped_at:
            self.rebuild()

    def set_mode(self, show_all: bool) -> None:
        self.show_all = show_all
        self.rebuild()

    def set_filter(self, text: str) -> None:
        if text == self.filter_text:
            return  # a rebuild redraws up to 50,000 lines: not for closing an empty filter box
        self.filter_text = text
        self.rebuild()

    def follow(self) -> None:
        self.following = True
        self.log_view.scroll_end(animate=False)
        self.unseen = 0
        self._update_title()

    def matching(self) -> list[str]:
        return [t for t, e in self.entries if self._matches(t, e)]

    def _update_title(self) -> None:
        empty = self.log_view.line_count == 0
        note = self.query_one("#log-empty", Static)
        note.display = not self._content_shown  # above the run markers, if there are any
        shown_again = not empty and not self.log_view.display
        self.log_view.display = not empty
        if shown_again and self.app.focused is None:
            # hidden while a filter matched nothing, the log lost the focus: give it back, or the arrow keys,
            # PgUp and Home scroll nothing once the filter is cleared
            self.log_view.focus()
        if not self._content_shown:
            what = "lines match" if self.filter_text else "lines yet" if self.show_all else "errors or warnings so far"
            note.update(f"no {what}  (e: {'errors only' if self.show_all else 'show all lines'}, /: filter)")
        mode = ("all lines" if self.show_all else "errors") + (", wrapped" if self.wrap else "")
        flt = f" /{self.filter_text}" if self.filter_text else ""
        self.border_title = f"Log: {mode}{flt}"
        self.border_subtitle = f"↓ {self.unseen} new (End to follow)" if self.unseen else ""

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
        """Called on the refresh tick: back at the end by scrolling means following again."""
        if self.unseen and self.log_view.is_vertical_scroll_end:
            self.unseen = 0
            self._update_title()
