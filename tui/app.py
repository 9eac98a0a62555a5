"""The Textual console's front door: the classes and functions that the CLI and the tests import from here live in
tui/console/ (the read-only console, its keys, the full console's actions, running it as a program)."""

from __future__ import annotations

from tui.console.control import ControlConsoleApp
from tui.console.run import exit_status, run_app
from tui.console.shown import empty_snapshot
from tui.console.viewer import ConsoleApp

__all__ = ["ConsoleApp", "ControlConsoleApp", "empty_snapshot", "exit_status", "run_app"]
