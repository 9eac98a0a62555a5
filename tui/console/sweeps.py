"""The console's way into a sweep of its deployment: which sweep the sweep key (S) opens, and a sweep that starts
while the console watches, found once.

A sweep runs in its own process (`bringup sweep`) and announces its results directory in a pointer file of the
deployment's state (tui/sweep/results.py: `pointer_path`); the console looks for it every few seconds: one small
JSON read and a `kill(pid, 0)`, nothing while there is none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tui.sweep.tail import latest_sweep, running_sweep

#: how often the console looks for a running sweep of its deployment
SWEEP_LOOK_S = 2.0


@dataclass
class SweepFinder:
    """Where the sweeps of this console's deployments are, and which ones it has opened on its own."""

    state: Path
    #: the results directories this console has opened on its own: closed by the operator, they stay closed
    opened: set[Path] = field(default_factory=set)

    def newly_running(self, deployment: str) -> Path | None:
        """A running sweep of `deployment` not opened on its own before (it is counted as opened now)."""
        found = running_sweep(self.state, deployment)
        if found is None or found in self.opened:
            return None
        self.opened.add(found)
        return found

    def to_show(self, deployment: str) -> Path | None:
        """The running sweep of `deployment`, else its latest one."""
        return running_sweep(self.state, deployment) or latest_sweep(self.state, deployment)
