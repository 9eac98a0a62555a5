"""The sweep screen: the sweep view over one results directory, followed while the runner writes it.

A full screen over the console (the matrix and two charts need the room); Esc, q or S go back to the console, whose
engine kept watching the deployment meanwhile. It polls every second, and a poll reads only the bytes appended to
records.jsonl since the last one (tui/sweep/tail.py): nothing appended, nothing read and nothing redrawn, so it
costs nothing to leave open for the hours a sweep runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.sweep.tail import SweepTail
from widgets.sweep import SweepView

#: how often the results directory is polled
POLL_S = 1.0


class SweepScreen(ModalScreen[None]):
    """Modal, though it fills the terminal: the console's own keys (restart, flags, quit) are not live under a
    view that does not show what they act on; Esc, q or S go back to the console."""

    BINDINGS = [
        Binding("escape,S,q", "close", "Back to the console", id="sweep.close"),
        Binding("c", "next_workload", "Charts of the next workload", id="sweep.workload"),
        Binding("g", "charts", "The charts on the whole screen, or back", id="sweep.charts"),
    ]

    def __init__(self, results_dir: Path | str, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.dir = Path(results_dir)
        self.tail = SweepTail(self.dir)
        self.clock = clock
        #: polls done, and those that found something new (and redrew): tests wait on them, never on a sleep
        self.polls = 0
        self.updates = 0

    def compose(self) -> ComposeResult:
        yield SweepView(id="sweep")
        keys = Text()
        for key, what in (("esc", "back"), ("arrows", "select"), ("c", "next workload"), ("g", "charts")):
            keys.append(f" {key} ", style="bold")
            keys.append(f"{what} ")
        keys.append(f"  {self.dir}", style="dim")
        yield Static(keys, id="sweep-keys")

    def on_mount(self) -> None:
        self.sub_title = str(self.dir)
        view = self.query_one(SweepView)
        view.border_title = "Sweep"
        self.poll()
        if not self.updates:
            view.show(self.tail.state, self.clock())  # an empty directory: say so, rather than nothing
        self.set_interval(POLL_S, self.poll, name="sweep-poll")
        self.query_one("#sweep-matrix").focus()

    def poll(self) -> None:
        self.polls += 1
        if self.tail.poll():
            self.updates += 1
            self.query_one(SweepView).show(self.tail.state, self.clock())

    def action_close(self) -> None:
        """Esc leaves the charts' full screen first (as Textual's maximize does elsewhere), then the sweep."""
        if self.maximized is not None:
            self.minimize()
            return
        self.dismiss(None)

    def action_charts(self) -> None:
        """The charts on the whole screen: at 80x24 the matrix leaves them a few rows only."""
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.query_one("#sweep-charts"), container=False)

    def action_next_workload(self) -> None:
        self.query_one(SweepView).next_workload()
