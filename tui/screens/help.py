"""The key reference: generated from the app's active bindings, so remapped keys show as remapped."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss_help", "Close")]

    def __init__(self, rows: list[tuple[str, str]], read_only: bool) -> None:
        super().__init__()
        self.rows = rows
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        t = Text()
        t.append("bringup keys\n\n", style="bold")
        for key, desc in self.rows:
            t.append(f"  {key:<10}", style="bold cyan")
            t.append(desc + "\n")
        if self.read_only:
            t.append("\nread-only mode: the restart, flags and start/stop keys only say that they are off\n",
                     style="yellow")
        t.append("\nctrl+p opens the command palette with the same actions. Esc closes this.", style="dim")
        with Vertical(id="dialog"):
            yield Static(t)

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
