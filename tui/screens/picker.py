"""Choose which deployment the console shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class PickerScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    #: the app's AUTO_FOCUS names the log, which this screen has not: without its own, nothing had the focus and
    #: Up, Down and Enter did nothing until Tab
    AUTO_FOCUS = "#picker"

    def __init__(self, names: list[tuple[str, str]], current: str) -> None:
        super().__init__()
        self.names = names
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Deployments", id="dialog-title")
            yield OptionList(*(Option(f"{n}  ({desc})", id=n) for n, desc in self.names), id="picker")

    def on_mount(self) -> None:
        ids = [n for n, _ in self.names]
        if self.current in ids:
            self.query_one(OptionList).highlighted = ids.index(self.current)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
