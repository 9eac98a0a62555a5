"""Choose which deployment the console shows; each with its phase as far as this console knows it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.model import Phase
from tui.screens.closing import ClosingModal

#: the theme's colour of each phase (as the lifecycle panel's phase badge, app.tcss)
PHASE_STYLE = {
    Phase.READY: "bold $success",
    Phase.FAILED: "bold $error",
    Phase.WARMUP: "$warning",
    Phase.STOPPING: "$warning",
    Phase.QUEUED: "$primary",
    Phase.STARTING: "$primary",
    Phase.LOADING: "$primary",
    Phase.GRAPH_CAPTURE: "$secondary",
}


class PickerScreen(ClosingModal[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    #: the app's AUTO_FOCUS names the log, which this screen has not: without its own, nothing had the focus and
    #: Up, Down and Enter did nothing until Tab
    AUTO_FOCUS = "#picker"

    def __init__(self, names: list[tuple[str, str]], current: str,
                 phases: dict[str, tuple[Phase | None, str]] | None = None, *, title: str = "Deployments") -> None:
        """`names`: (deployment, what it is); `phases`: for each deployment, its phase (None: not known) and how
        to say it ("ready", "ready 5 min ago", "not watched yet"); `title`: names the one shown now, and its host."""
        super().__init__()
        self.title_text = title
        self.names = names
        self.current = current
        self.phases = phases or {}

    def _prompt(self, name: str, desc: str) -> Content:
        # assembled, not markup: names and commands come from the config, and may hold brackets
        phase, label = self.phases.get(name, (None, ""))
        style = PHASE_STYLE.get(phase, "$text-muted") if phase is not None else "italic $text-muted"
        parts: list[str | tuple[str, str]] = [(name, "bold")]
        if label:
            parts += ["  ", (label, style)]
        parts += ["  ", (f"({desc})", "$text-muted")]
        return Content.assemble(*parts)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content(self.title_text), id="dialog-title")  # not markup: names from the config
            yield OptionList(*(Option(self._prompt(n, desc), id=n) for n, desc in self.names), id="picker")

    def on_mount(self) -> None:
        ids = [n for n, _ in self.names]
        if self.current in ids:
            self.query_one(OptionList).highlighted = ids.index(self.current)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
