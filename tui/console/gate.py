"""What the read-only console may do, decided in one place.

Every action a key, the command palette, a dialog or a link runs reaches the app through Textual's
`App.run_action`; the console's app (tui/console/viewer.py) asks `refusal()` there, before the action is dispatched.
So read-only (`--read-only`, `read_only = true`, and every console `bringup serve` runs without --allow-actions) is
one rule, not a property of each key's binding: an action that changes the deployment, sends its server work or
writes a file says "read-only" instead, whichever key, screen or palette entry asked for it.

Each of bringup's own actions is listed here with what it does; an action of bringup that is not listed is refused
in read-only mode (and `tests/console/test_read_only_gate.py` fails, naming it, until it is listed), so a new action
that writes cannot slip past the rule by being forgotten. Textual's own actions (scrolling, focus, the palette,
maximize) change nothing but the view and pass, except those named in `ACTIONS` (`screenshot` writes a file).
No Textual here: the app resolves which method an action runs and passes its module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Effect(Enum):
    """What an action does beyond this console's own view."""

    VIEW = "view"  #: what this console shows, and nothing else: allowed read-only
    CHANGE = "change"  #: the deployment's state or flags, work sent to its server, or a file written: refused


@dataclass(frozen=True, slots=True)
class Action:
    """An action's effect and, for one that changes, the words of its refusal ("no {what} from this console")."""

    effect: Effect
    what: str = ""


def _view() -> Action:
    return Action(Effect.VIEW)


def _change(what: str) -> Action:
    return Action(Effect.CHANGE, what)


#: every action of bringup's console, its screens and widgets, by the name after `action_` (a binding's action
#: without its namespace and parameters)
ACTIONS: dict[str, Action] = {
    # the full console's actions (tui/console/control.py): the deployment changed
    "restart": _change("restart"),
    "flags": _change("flag changes"),
    "start_stop": _change("start/stop"),
    # the read-only console's own keys for those three: the refusal itself (tui/console/screen.py)
    "read_only": _view(),
    # work sent to the server, a file written on the host (tui/console/viewer.py)
    "probe_now": _change("probe (a real generation sent to the server)"),
    "record": _change("incident record (a file written on the host)"),
    # viewing (tui/console/viewer.py, tui/console/screen.py)
    "pause": _view(),
    "pick": _view(),  # lists the deployments this console may show (tui/console/scope.py) and opens one of them
    "sweep": _view(),
    "quit": _view(),
    "filter": _view(),
    "toggle_errors": _view(),
    "toggle_wrap": _view(),
    "follow": _view(),
    "close_filter": _view(),
    "help": _view(),
    # the overview (tui/screens/fleet.py, widgets/fleet.py): `act` asks the app to run the console screen's own
    # binding for that key, through run_action: gated there, as the console screen's key would be
    "open": _view(),
    "act": _view(),
    "sort": _view(),
    "clear_filter": _view(),
    "move": _view(),
    "page": _view(),
    "choose": _view(),
    # dialogs (tui/screens/): the picker, help and the sweep view only show; the flags dialog and the
    # confirmation lead to a restart (the read-only console never opens them)
    "cancel": _view(),
    "dismiss_help": _view(),
    "close": _view(),
    "next_workload": _view(),
    "charts": _view(),
    "scroll_end": _view(),
    "toggle_flag": _change("flag changes"),
    "toggle_named": _change("flag changes"),
    "undo": _change("flag changes"),
    "apply": _change("flag changes"),
    "answer": _change("actions to confirm"),
    "override": _change("override of a refusal"),
    # Textual's own that writes: an SVG file in the console's working directory
    "screenshot": _change("screenshot file (a file written on the host)"),
}

#: the refusal's wording, one for every action refused
REFUSAL = ("read-only: no {what} from this console (started with --read-only, by `bringup serve` without "
           "--allow-actions, or read_only = true in the config); without it, the key does it")


def refusal(name: str, module: str, *, read_only: bool) -> str | None:
    """None when the action `name` (whose method is defined in `module`, "" if none) may run; else what to say.
    Only the read-only console refuses; an unlisted action of bringup's own is refused there too."""
    if not read_only:
        return None
    known = ACTIONS.get(name)
    if known is not None:
        return REFUSAL.format(what=known.what) if known.effect is Effect.CHANGE else None
    if module.split(".")[0] == "textual" or not module:
        return None  # Textual's own (scrolling, focus, the palette), or no such action: nothing runs
    return REFUSAL.format(what=f"{name.replace('_', ' ')} (an action not known to change nothing)")
