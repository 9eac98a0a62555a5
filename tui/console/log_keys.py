"""The log panel's keys: its filter box, all lines or errors only, wrapping, and following the log again. Declared
as keys by the console's classes (tui/console/viewer.py), which keep their order in the key bar; done here."""

from __future__ import annotations

from textual.widgets import Input

from tui.console.keys import ConsoleKeys
from widgets.error_log import FILTER_EDITING, FILTER_IDLE, ErrorLog


class LogKeys(ConsoleKeys):
    """What the log panel's keys do; the console's classes derive from it."""

    def action_filter(self) -> None:
        """The filter box is always on screen, one row: opening it changes no layout (a re-layout of the whole
        screen was most of the time a key took to show during a log burst)."""
        inp = self.query_one("#log-filter", Input)
        inp.disabled = False
        inp.placeholder = FILTER_EDITING
        inp.value = self.query_one(ErrorLog).filter_text
        inp.focus()

    def _end_filter_edit(self, inp: Input) -> None:
        inp.disabled = True
        inp.placeholder = FILTER_IDLE
        self.query_one("#log").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "log-filter":
            self.query_one(ErrorLog).set_filter(event.value)
            self._end_filter_edit(event.input)

    def action_close_filter(self) -> None:
        """Esc clears the filter: while typing it, or after it was applied."""
        inp = self.query_one("#log-filter", Input)
        inp.value = ""
        self.query_one(ErrorLog).set_filter("")
        if not inp.disabled:
            self._end_filter_edit(inp)

    def action_toggle_errors(self) -> None:
        log = self.query_one(ErrorLog)
        log.set_mode(not log.show_all)

    def action_toggle_wrap(self) -> None:
        log = self.query_one(ErrorLog)
        log.set_wrap(not log.wrap)

    def action_follow(self) -> None:
        self.query_one(ErrorLog).follow()
