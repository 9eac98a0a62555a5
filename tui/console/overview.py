"""The console over many deployments, as data: the overview's rows, the picker's list and phases. No Textual: the app
(tui/console/viewer.py) switches between the overview (tui/screens/fleet.py) and the console, which are app modes.

The engines are the fleet's (tui/engine/fleet.py): all run from the start, whichever one the console shows, so
switching is instant and closes nothing; the console only changes which engine it listens to.
"""

from __future__ import annotations

from tui.config.settings import Settings
from tui.console.port import ConsoleFleet
from tui.model import Phase
from widgets.fleet_rows import FleetRow, row_for

#: the app's modes: the console of one deployment, and the overview of them all (with several)
CONSOLE_MODE = "console"
FLEET_MODE = "fleet"
#: the overview's name among the app's installed screens (the fleet mode's screen)
FLEET_SCREEN = "fleet"


def choices(settings: Settings) -> list[tuple[str, str]]:
    """The picker's list: each configured deployment, with what runs it and where."""
    return [(n, f"{d.manager} {d.what_runs} @ {d.host_label}")
            for n, d in settings.deployments.items()]


def picker_phases(names: list[str], *, shown: str, shown_phase: Phase, fleet: ConsoleFleet | None,
                  seen: dict[str, tuple[Phase, float]], now: float) -> dict[str, tuple[Phase | None, str]]:
    """Each deployment's phase as this console knows it: with a fleet, every one live; else the one it shows
    (`shown`), live; one it watched before, as it was when it left it; the others are not watched (reading them
    would mean connecting to each host)."""
    out: dict[str, tuple[Phase | None, str]] = {}
    live = {} if fleet is None else {n: e.snapshot(now).phase for n, e in fleet.engines.items()}
    for n in names:
        if n in live:  # the fleet's engines all run: every phase is live
            out[n] = (live[n], f"{live[n].value} (now)")
        elif n == shown:
            out[n] = (shown_phase, f"{shown_phase.value} (now)")
        elif n in seen:
            phase, at = seen[n]
            ago = max(0, int(now - at))
            out[n] = (phase, f"{phase.value} {ago // 60} min ago" if ago >= 60 else f"{phase.value} {ago} s ago")
        else:
            out[n] = (None, "not watched")
    return out


def fleet_rows(fleet: ConsoleFleet | None, action_notes: dict[str, str], now: float) -> list[FleetRow]:
    """Every deployment's row as of now: what the engines have read, no I/O."""
    if fleet is None:
        return []
    return [row_for(v.snapshot, v.gpus, v.host_down, action_notes.get(v.snapshot.deployment, ""))
            for v in fleet.views(now)]
