"""The console's way into a sweep of its deployment: the sweep key (S) opens the sweep view, and a sweep that
starts while the console watches opens it by itself, once.

A sweep runs in its own process (`bringup sweep`) and announces its results directory in a pointer file of the
deployment's state (tui/sweep/results.py: `pointer_path`); the console looks for it every few seconds: one small
JSON read and a `kill(pid, 0)`, nothing while there is none. Never over a dialog: an operator answering a restart
question keeps the question; the view opens at the next look.
"""

from __future__ import annotations

from pathlib import Path

from tui.config import Settings
from tui.console.keys import ConsoleKeys
from tui.screens.sweep import SweepScreen
from tui.sweep.tail import latest_sweep, running_sweep

#: how often the console looks for a running sweep of its deployment
SWEEP_LOOK_S = 2.0


class SweepKeys(ConsoleKeys):
    """The sweep key and the discovery of a running sweep; the console's classes derive from it."""

    settings: Settings
    deployment: str

    def start_sweep_discovery(self) -> None:
        #: the results directories this console has opened on its own: closed by the operator, they stay closed
        self.sweeps_opened: set[Path] = set()
        self.set_interval(SWEEP_LOOK_S, self.look_for_sweep, name="sweep-discovery")
        self.look_for_sweep()

    def look_for_sweep(self) -> None:
        found = running_sweep(self.settings.state_path(), self.deployment)
        if found is None or found in self.sweeps_opened or len(self.screen_stack) > 1:
            return
        self.sweeps_opened.add(found)
        self.push_screen(SweepScreen(found), self._sweep_closed)
        self.notify(f"a sweep of {self.deployment} is running: its view is open (Esc: back to the console, S: "
                    "the sweep again)", title="sweep", timeout=8, markup=False)

    def _sweep_closed(self, _: None) -> None:
        """The key bar is drawn from the active screen's keys: a resize under the view drew it without ours."""
        self._show_keys()

    def action_sweep(self) -> None:
        """The running sweep of this deployment, else its latest one (S again, in the view, closes it)."""
        state = self.settings.state_path()
        found = running_sweep(state, self.deployment) or latest_sweep(state, self.deployment)
        if found is None:
            self.notify(f"no sweep of {self.deployment} found under {state}: `bringup sweep {self.deployment} "
                        "PLAN` runs one, and its view opens here by itself", title="sweep", timeout=8,
                        markup=False)
            return
        self.push_screen(SweepScreen(found), self._sweep_closed)
