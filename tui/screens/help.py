"""The key reference: generated from the app's active bindings, so remapped keys show as remapped. It scrolls (up,
down, PgUp, PgDn, Home, End) where the terminal is too short for it (80x24), and each description wraps under
itself, so that every line can be reached and none runs off the dialog's edge."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.screens.closing import ClosingModal

#: the key column's width (the widest key names, "up/down", "ctrl+p", fit)
KEY_W = 10
#: the last line: how to close it (a test reads it to know the whole reference can be reached)
LAST_LINE = "ctrl+p opens the command palette with the same actions. Esc closes this."


class HelpScreen(ClosingModal[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss_help", "Close")]
    #: the scrolling body has the focus, so that the arrow and page keys scroll it
    AUTO_FOCUS = "#help-body"

    def __init__(self, rows: list[tuple[str, str]], read_only: bool) -> None:
        super().__init__()
        self.rows = rows
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(width=KEY_W, style="bold cyan", no_wrap=True)
        keys.add_column(ratio=1)  # wraps within its column: a long description stays beside its key
        for key, desc in self.rows:
            keys.add_row(Text(key), Text(desc))  # Text, not markup: keys and descriptions may hold brackets
        with VerticalScroll(id="help-body"):
            yield Static(Text("bringup keys", style="bold"), id="dialog-title")
            if self.read_only:  # first: in view without scrolling
                yield Static(Text("read-only mode: the keys that restart, change flags, start/stop, probe the "
                                  "server or write a file only say that they are off", style="yellow"),
                             classes="help-note help-first")
            yield Static(keys, id="help-keys")
            yield Static(Text(LAST_LINE, style="dim"), id="help-last", classes="help-note")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
