"""A yes/no dialog that names exactly what will happen: deployment, host, target and the flag change.

Refused (`refused=True`), it says why the action cannot be done and offers nothing to confirm: no Yes, no `y`. It
may offer one clearly named way past the refusal (`override`, e.g. "restart WITHOUT GPU evidence"), on its own
key: choosing it answers True, and the caller asks again, in a dialog that says the risk, before anything is done.
"""

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
        Binding("w", "override", "Override", id="confirm.override"),
    ]

    def __init__(self, title: str, lines: list[str], *, refused: bool = False, override: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines
        self.refused = refused
        #: the named way past a refusal, as its button says it ("" for none)
        self.override = override if refused else ""

    def compose(self) -> ComposeResult:
        # every question it asks changes a running server (restart, stop, rollback): always the warning colours
        with Vertical(id="dialog", classes="danger"):
            yield Static(Text(self.title_text, style="bold"), id="dialog-title")
            yield Static(Text("\n".join(self.lines)), id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                if self.refused:
                    yield Button("Close (n)", id="no")
                    if self.override:
                        yield Button(f"{self.override} (w)", variant="error", id="override")
                else:
                    yield Button("Yes (y)", variant="error", id="yes")
                    yield Button("No (n)", id="no")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A refused dialog has nothing to confirm: `y` does nothing there; `w` only where an override is offered."""
        if action == "answer" and parameters == (True,):
            return not self.refused
        if action == "override":
            return bool(self.override)
        return True

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    def action_override(self) -> None:
        self.dismiss(True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id in ("yes", "override"))
