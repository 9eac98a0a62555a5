"""Textual messages the console routes, named as past events. They carry plain data only.

Everything the engine reports arrives as one message, `EngineUpdated`, carrying the engine's own typed update
(tui/engine/updates.py): one data path from the engine into the console, dispatched on the update's type. The
others come from the console's own workers (a restart it runs).
"""

from __future__ import annotations

from textual.message import Message

from tui.engine.updates import Update
from tui.model import Outcome, Step


class EngineUpdated(Message):
    def __init__(self, update: Update) -> None:
        super().__init__()
        self.update = update


class RestartStepped(Message):
    def __init__(self, step: Step) -> None:
        super().__init__()
        self.step = step


class RestartFinished(Message):
    """A restart (or start) this console ran has ended. `action`: what it was (restart, start), for the
    message that says so; `key`: the key that asks for it again."""

    def __init__(self, outcome: Outcome, action: str = "restart", key: str = "r") -> None:
        super().__init__()
        self.outcome = outcome
        self.action = action
        self.key = key
