"""A yes/no dialog that names exactly what will happen: deployment, host, target and the flag change."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from tui.screens.closing import ClosingModal


class ConfirmScreen(ClosingModal[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, title: str, lines: list[str]) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines

    def compose(self) -> ComposeResult:
        # every question it asks changes a running server (restart, stop, rollback): always the warning colours
        with Vertical(id="dialog", classes="danger"):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            yield Static(Text("\n".join(self.lines)), id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
