"""Where the console goes besides its own screen: the picker of deployments (`d`), the overview of them all (the
fleet mode, with several deployments), and the view of a sweep of the deployment (found running, or asked for with
`S`). One deployment is shown at a time: a restart running on it keeps it shown until the restart ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from tui.config.settings import Settings
from tui.console.gated import GatedApp
from tui.console.overview import CONSOLE_MODE, FLEET_MODE, FLEET_SCREEN, choices, fleet_rows, picker_phases
from tui.console.port import ConsoleFleet
from tui.console.screen import ConsoleScreen
from tui.console.shown import Shown
from tui.console.sweeps import SweepFinder
from tui.model import Phase
from tui.screens.fleet import FleetScreen
from tui.screens.picker import PickerScreen
from tui.screens.sweep import sweep_screen_of
from widgets.fleet_rows import FleetRow


class NavigatingApp(GatedApp):
    """The console's ways to its other screens; the console's app (viewer.py) holds what they read."""

    SCREEN: ClassVar[type[ConsoleScreen]]
    settings: Settings
    deployment: str
    shown: Shown
    fleet: ConsoleFleet | None
    sweeps: SweepFinder
    restarting: bool
    clock: Callable[[], float]
    seen_phases: dict[str, tuple[Phase, float]]
    action_notes: dict[str, str]

    @property
    def console_screen(self) -> ConsoleScreen:
        raise NotImplementedError  # the console's app's

    def open_watch(self, name: str) -> None:
        raise NotImplementedError  # the console's app's

    def action_pick(self) -> None:
        names = choices(self.settings)  # the deployments this console may show (`only`), no other
        if len(names) <= 1:
            self.notify(f"this console shows {self.deployment} only" if names else "no deployment is configured")
            return

        def chosen(name: str | None) -> None:
            if name and name != self.deployment and not self._busy_with_another(name):
                self.seen_phases[self.deployment] = (self.shown.snap.phase, self.clock())
                self.open_watch(name)

        dep = self.settings.deployments.get(self.deployment)
        where = f"{self.deployment} on {dep.host_label}" if dep is not None else self.deployment
        phases = picker_phases([n for n, _ in names], shown=self.deployment, shown_phase=self.shown.snap.phase,
                               fleet=self.fleet, seen=self.seen_phases, now=self.clock())
        self.push_screen(PickerScreen(names, self.deployment, phases, title=f"Deployments · showing {where}"),
                         chosen)

    def start_fleet(self, live: bool) -> None:
        """Start every deployment's engine (when live) and show the overview, the fleet mode's screen."""
        if self.fleet is None:
            return
        if live:
            self.fleet.start()
        self.install_screen(FleetScreen(self.fleet_rows, read_only=self.read_only, clock=lambda: self.clock()),
                            name=FLEET_SCREEN)
        self.add_mode(FLEET_MODE, FLEET_SCREEN)
        self.switch_mode(FLEET_MODE)

    def fleet_rows(self) -> list[FleetRow]:
        """Every deployment's row as of now: what the engines have read, no I/O."""
        return fleet_rows(self.fleet, self.action_notes, self.clock())

    def on_console_screen_overview_asked(self) -> None:
        if self.fleet is not None:
            self.switch_mode(FLEET_MODE)

    def _busy_with_another(self, name: str) -> bool:
        """A restart runs here on another deployment: its steps, result and rollback offer are drawn on the
        deployment this console shows, so it goes on showing that one until the restart ends."""
        if self.restarting and name != self.deployment:
            self.notify(f"a restart of {self.deployment} is running: one deployment at a time from this console "
                        "until it ends", title=name, severity="warning", markup=False)
            return True
        return False

    def on_fleet_screen_open_asked(self, m: FleetScreen.OpenAsked) -> None:
        if self._busy_with_another(m.name):
            return
        self.open_watch(m.name)
        self.switch_mode(CONSOLE_MODE)

    async def on_fleet_screen_action_asked(self, m: FleetScreen.ActionAsked) -> None:
        """The console's own action, on the selected row's deployment: the console shows it from now on (its
        restart's steps are drawn there), and the action's binding is the console screen's, so the read-only
        console says "read-only" and the full one asks the same confirmation, naming deployment and host."""
        if self._busy_with_another(m.name):
            return
        self.open_watch(m.name)
        binding = next((b for b in self.SCREEN.own_bindings() if b.id == m.action), None)
        if binding is not None:
            await self.run_action(binding.action, self.console_screen)

    # ------------------------------------------------------------------ sweeps

    def look_for_sweep(self) -> None:
        """A sweep of the deployment that started meanwhile opens its view, once. Never over a dialog nor over
        the overview: an operator answering a restart question keeps the question; the view opens at the next
        look."""
        if self.current_mode != CONSOLE_MODE or len(self.screen_stack) > 1:
            return
        found = self.sweeps.newly_running(self.deployment)
        if found is None:
            return
        self.push_screen(sweep_screen_of(self, found))
        self.notify(f"a sweep of {self.deployment} is running: its view is open (Esc: back to the console, S: "
                    "the sweep again)", title="sweep", timeout=8, markup=False)

    def action_sweep(self) -> None:
        """The running sweep of this deployment, else its latest one (S again, in the view, closes it)."""
        found = self.sweeps.to_show(self.deployment)
        if found is None:
            self.notify(f"no sweep of {self.deployment} found under {self.settings.state_path()}: `bringup sweep "
                        f"{self.deployment} PLAN` runs one, and its view opens here by itself", title="sweep",
                        timeout=8, markup=False)
            return
        self.push_screen(sweep_screen_of(self, found))
