"""The read-only console's one gate (issue 47.6; tui/console/gate.py) and its deployments (tui/console/scope.py).

Every action of bringup's console, screens and widgets is listed in the gate with what it does: the enumeration below
fails, naming it, on an action that is not, so a new key that writes cannot slip past read-only by being forgotten.
Each action the gate says changes something is then run in the read-only console, through the key, the palette's
path (`run_action`) and a screen's namespace: each says "read-only" and does nothing. And a console started on some
deployments (`--only`, what `bringup serve DEP` runs) lists and opens no other.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

from textual import actions
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

import tui.console
import tui.screens
import widgets
from tests.helpers.console_app import shown
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.config.settings import Settings
from tui.console.control import ControlConsoleApp
from tui.console.gate import ACTIONS, Effect
from tui.console.viewer import ConsoleApp
from tui.screens.picker import PickerScreen


def console_classes() -> list[type[DOMNode]]:
    """Every Textual node class defined in tui/console, tui/screens and widgets (each module imported)."""
    found: list[type[DOMNode]] = []
    for package in (tui.console, tui.screens, widgets):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            found += [c for _, c in inspect.getmembers(module, inspect.isclass)
                      if issubclass(c, DOMNode) and c.__module__ == module.__name__]
    return found


def declared_actions(cls: type[DOMNode]) -> dict[str, str]:
    """Action name -> where it comes from, for the class's own BINDINGS and its own action methods."""
    out: dict[str, str] = {}
    for b in vars(cls).get("BINDINGS", ()):
        action = b.action if isinstance(b, Binding) else b[1]
        _, name, _ = actions.parse(action)
        out[name] = f"{cls.__module__}.{cls.__name__}.BINDINGS ({action})"
    for attr in vars(cls):
        for prefix in ("action_", "_action_"):
            if attr.startswith(prefix):
                out[attr.removeprefix(prefix)] = f"{cls.__module__}.{cls.__name__}.{attr}"
    return out


def textual_action(name: str) -> bool:
    """Textual itself defines the action (on the app, a screen or a widget): scrolling, focus, quit..."""
    from textual.app import App
    from textual.widget import Widget

    return any(callable(getattr(base, f"action_{name}", None)) for base in (App, Screen, Widget))


def test_every_action_of_the_console_is_listed_in_the_gate() -> None:
    classes = console_classes()
    assert len(classes) > 10, classes  # the walk found the screens and widgets
    seen: dict[str, str] = {}
    for cls in classes:
        seen |= declared_actions(cls)
    unlisted = {name: where for name, where in seen.items() if name not in ACTIONS and not textual_action(name)}
    assert not unlisted, ("actions not in tui/console/gate.py's ACTIONS (say whether each changes or writes "
                          f"anything: a read-only console refuses those): {unlisted}")
    # and the two keys of issue 47.6 are among those refused
    assert ACTIONS["probe_now"].effect is Effect.CHANGE and ACTIONS["record"].effect is Effect.CHANGE


def two_deployments(tmp_path: Path) -> Settings:
    settings = settings_for(tmp_path)
    settings.deployments["hidden-dep"] = settings.deployments["sim"].model_copy()
    return settings


async def test_g_and_i_in_the_read_only_console_say_read_only_and_do_nothing(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    app = ConsoleApp(settings, "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        for key, what in (("g", "read-only: no probe"), ("i", "read-only: no incident record")):
            await pilot.press(key)
            assert await until(pilot, lambda: any(n.startswith(what) for n in shown(app))), (key, shown(app))  # noqa: B023
        await settled(pilot)
        assert len(shown(app)) == 2, shown(app)  # the refusals, and nothing the actions would have said
        assert not (settings.state_path() / "deployments").exists()  # no record written, no directory made
        # neither is offered where the keys are listed: the help and the palette's commands
        help_keys = app.console_screen.help_rows()
        assert not any("incident record" in d or "Probe" in d for _, d in help_keys), help_keys
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Filter" in titles and not any("incident record" in t or "Probe" in t for t in titles), titles


async def test_every_change_action_is_refused_read_only_however_it_is_asked_for(tmp_path: Path) -> None:
    """Through each namespace Textual resolves (the app, the screen, a widget's), with and without parameters: the
    gate sits where every one of them passes, so none reaches an action method."""
    app = ConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        changes = [name for name, a in ACTIONS.items() if a.effect is Effect.CHANGE]
        for name in changes:
            for action, namespace in ((f"app.{name}", None), (f"screen.{name}", None), (name, app.screen),
                                      (f"{name}('x')", app.console_screen.log_panel)):
                before = len(shown(app))
                assert await app.run_action(action, namespace) is True, action
                assert await until(pilot, lambda: len(shown(app)) > before), action  # noqa: B023
                await pilot.pause()
                said = shown(app)[before:]
                assert len(said) == 1 and said[0].startswith(f"read-only: no {ACTIONS[name].what}"), (action, said)
        await settled(pilot)
    # the full console runs them: the gate is the read-only one's
    full = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    assert all(full.refusal(f"app.{name}") is None for name in changes)


class Wiper(Screen[None]):
    """A screen with an action nobody listed in the gate: what a new key that writes would be."""

    BINDINGS = [Binding("x", "wipe", "Wipe the state directory")]
    wiped = False

    def action_wipe(self) -> None:
        Wiper.wiped = True


async def test_an_action_the_gate_does_not_know_is_refused_read_only(tmp_path: Path) -> None:
    app = ConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(Wiper())
        await pilot.press("x")
        assert await until(pilot, lambda: any(n.startswith("read-only: no wipe") for n in shown(app))), shown(app)
        assert not Wiper.wiped
        await pilot.press("tab", "down")  # Textual's own keys still work: nothing of theirs is refused
        await settled(pilot)
        assert len(shown(app)) == 1, shown(app)


async def test_a_console_on_one_deployment_opens_no_other(tmp_path: Path) -> None:
    """`console --only sim` (each `bringup serve sim` session): the picker has nothing else to offer, and the door
    every way of opening a deployment goes through refuses one it does not hold."""
    app = ConsoleApp(two_deployments(tmp_path), "sim", live=False, only=["sim"])
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("d")
        assert await until(pilot, lambda: "this console shows sim only" in shown(app)), shown(app)
        assert not isinstance(app.screen, PickerScreen)
        app.open_watch("hidden-dep")
        assert await until(pilot, lambda: any("'hidden-dep' is not shown from this console" in n
                                              for n in shown(app))), shown(app)
        assert app.deployment == "sim" and list(app.settings.deployments) == ["sim"]


async def test_a_console_on_several_deployments_lists_those_only(tmp_path: Path) -> None:
    settings = two_deployments(tmp_path)
    settings.deployments["b"] = settings.deployments["sim"].model_copy()
    app = ConsoleApp(settings, "sim", live=False, only=["sim", "b"])
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("d")
        assert await until(pilot, lambda: isinstance(app.screen, PickerScreen))
        picker: Any = app.screen
        assert [n for n, _ in picker.names] == ["sim", "b"]
