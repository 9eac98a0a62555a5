"""The console over many deployments: the fleet overview opens first (tui/screens/fleet.py), Enter there shows a
deployment in the console, Esc in the console goes back, and the overview's acting keys run the console's own
actions on the selected row (the same confirmations; in the read-only console the same refusal).

The engines are the fleet's (tui/engine/fleet.py): all run from the start, whichever one the console shows, so
switching is instant and closes nothing; the console only changes which engine it listens to.
"""

from __future__ import annotations

from collections.abc import Callable

from tui.config import Settings
from tui.console.log_keys import LogKeys
from tui.engine.fleet import Fleet
from tui.model import Phase, Snapshot
from tui.screens.fleet import FleetScreen
from tui.screens.picker import PickerScreen
from widgets.error_log import ErrorLog
from widgets.fleet import FleetRow, row_for

#: the overview's name among the app's installed screens
FLEET_SCREEN = "fleet"


class FleetKeys(LogKeys):
    """The overview's way in and out of the console, and the picker of another deployment; the console's classes
    derive from it. Without a fleet (one deployment, or one named on the command line) the overview does nothing."""

    settings: Settings
    deployment: str
    restarting: bool
    fleet: Fleet | None
    clock: Callable[[], float]
    snap: Snapshot
    seen_phases: dict[str, tuple[Phase, float]]
    action_notes: dict[str, str]

    def open_watch(self, name: str) -> None:  # the console's (tui/console/viewer.py)
        raise NotImplementedError

    def action_pick(self) -> None:
        names = [(n, f"{d.manager} {d.what_runs} @ {d.host_label}")
                 for n, d in self.settings.deployments.items()]
        if len(names) <= 1:
            self.notify("only one deployment is configured")
            return

        def chosen(name: str | None) -> None:
            if name and name != self.deployment and not self._busy_with_another(name):
                self.seen_phases[self.deployment] = (self.snap.phase, self.clock())
                self.open_watch(name)

        dep = self.settings.deployments.get(self.deployment)
        where = f"{self.deployment} on {dep.host_label}" if dep is not None else self.deployment
        self.push_screen(PickerScreen(names, self.deployment, self._picker_phases([n for n, _ in names]),
                                      title=f"Deployments · showing {where}"), chosen)

    def _picker_phases(self, names: list[str]) -> dict[str, tuple[Phase | None, str]]:
        """Each deployment's phase as this console knows it: with a fleet, every one live; else the one it watches,
        live; one it watched before, as it was when it left it; the others are not watched (reading them would mean
        connecting to each host)."""
        now = self.clock()
        out: dict[str, tuple[Phase | None, str]] = {}
        live = {} if self.fleet is None else {n: e.snapshot(now).phase for n, e in self.fleet.engines.items()}
        for n in names:
            if n in live:  # the fleet's engines all run: every phase is live
                out[n] = (live[n], f"{live[n].value} (now)")
            elif n == self.deployment:
                out[n] = (self.snap.phase, f"{self.snap.phase.value} (now)")
            elif n in self.seen_phases:
                phase, at = self.seen_phases[n]
                ago = max(0, int(now - at))
                out[n] = (phase, f"{phase.value} {ago // 60} min ago" if ago >= 60 else f"{phase.value} {ago} s ago")
            else:
                out[n] = (None, "not watched")
        return out

    def start_fleet(self, live: bool) -> None:
        """Start every deployment's engine (when live) and open the overview over the console."""
        if self.fleet is None:
            return
        if live:
            self.fleet.start()
        self.install_screen(FleetScreen(self.fleet_rows, refresh_s=1 / self.settings.ui.refresh_hz,
                                        read_only=self.read_only, clock=lambda: self.clock()), name=FLEET_SCREEN)
        self.push_screen(FLEET_SCREEN)

    def fleet_rows(self) -> list[FleetRow]:
        """Every deployment's row as of now: what the engines have read, no I/O."""
        if self.fleet is None:
            return []
        return [row_for(v.snapshot, v.gpus, v.host_down, self.action_notes.get(v.snapshot.deployment, ""))
                for v in self.fleet.views(self.clock())]

    def show_fleet(self) -> None:
        if self.fleet is not None and self.get_screen(FLEET_SCREEN) not in self.screen_stack:
            self.push_screen(FLEET_SCREEN)

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
        if self.screen is self.get_screen(FLEET_SCREEN):
            self.pop_screen()
        # the key bar was drawn while the overview was on top (its keys were the active ones then): the console's
        self.call_after_refresh(self._show_keys)

    async def on_fleet_screen_action_asked(self, m: FleetScreen.ActionAsked) -> None:
        """The console's own action, on the selected row's deployment: the console shows it from now on (its
        restart's steps are drawn there), and the action's binding is the console's, so the read-only console
        says "read-only" and the full one asks the same confirmation, naming deployment and host."""
        if self._busy_with_another(m.name):
            return
        self.open_watch(m.name)
        binding = next((b for b in self._own_bindings() if b.id == m.action), None)
        if binding is not None:
            await self.run_action(binding.action)

    def action_close_filter(self) -> None:
        """Esc clears the log's filter first; with none, it goes back to the overview."""
        inp_open = not self.query_one("#log-filter").disabled
        if self.fleet is not None and not inp_open and not self.query_one(ErrorLog).filter_text:
            self.show_fleet()
            return
        super().action_close_filter()
