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
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Static

from tui.screens.closing import ClosingModal
from tui.sweep.tail import SweepTail
from widgets.sweep import SweepView

#: how often the results directory is polled
POLL_S = 1.0
#: the name the console installs its sweep view under: made once, shown again by S
SWEEP_SCREEN = "sweep"


class SweepScreen(ClosingModal[None]):
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
        self._poll_timer: Timer | None = None
        self._suspended = False

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
        self._poll_timer = self.set_interval(POLL_S, self.poll, name="sweep-poll")
        self.query_one("#sweep-matrix").focus()

    def on_screen_suspend(self) -> None:
        """Closed (kept installed, to be shown again): nothing to poll for a view no one sees."""
        self._suspended = True
        if self._poll_timer is not None:
            self._poll_timer.pause()

    def on_screen_resume(self) -> None:
        """Shown again: what the sweep wrote meanwhile at once, then a poll a second as before."""
        if not self._suspended:
            return
        self._suspended = False
        self.poll()
        if self._poll_timer is not None:
            self._poll_timer.resume()

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


def sweep_screen_of(app: App[Any], results_dir: Path) -> str:
    """The name of `app`'s sweep view of `results_dir`, to push: the one installed before when it shows that
    directory, else a new one in its place (the old one removed). Made once and shown again rather than built at
    each S: a view rebuilt re-reads every record and builds its table and charts again, and each discarded one
    leaves its widgets' style caches to Textual's caches for a while (a console left open all day, the sweep
    opened and closed, grew by it)."""
    if app.is_screen_installed(SWEEP_SCREEN):
        old = app.get_screen(SWEEP_SCREEN)
        if isinstance(old, SweepScreen) and old.dir == Path(results_dir):
            return SWEEP_SCREEN
        app.uninstall_screen(SWEEP_SCREEN)
        old.remove()
    app.install_screen(SweepScreen(results_dir), SWEEP_SCREEN)
    return SWEEP_SCREEN
