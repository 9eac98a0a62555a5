"""Textual messages the console routes, named as past events. They carry plain data only.

Everything the engine reports arrives as one message, `EngineUpdated`, carrying the engine's own typed update
(tui/engine/updates.py): one data path from the engine into the console, dispatched on the update's type. An update
that carries the whole picture of its kind (the phase, the GPUs with their history, the throughput with its history)
makes the one before it in the queue news of no use: Textual drops that one (`can_replace`), so a burst of them
behind a busy loop is drawn once, not once each. Log lines never coalesce: each batch is lines not drawn yet. The
others come from the console's own workers (a restart it runs).
"""

from __future__ import annotations

from textual.message import Message

from tui.engine.updates import (
    CollectorFailed,
    GpusSampled,
    PhaseChanged,
    PictureTaken,
    ProbeAnswered,
    ThroughputSampled,
    Update,
)
from tui.model import Outcome, Step

#: the updates whose newer one tells all that the one before it did
WHOLE_PICTURE = (PictureTaken, PhaseChanged, GpusSampled, ThroughputSampled, CollectorFailed, ProbeAnswered)


class EngineUpdated(Message):
    def __init__(self, update: Update) -> None:
        super().__init__()
        self.update = update

    def can_replace(self, message: Message) -> bool:
        """The next message in the queue is an update of the same whole-picture kind: one of the two is enough."""
        return (isinstance(message, EngineUpdated) and type(message.update) is type(self.update)
                and isinstance(self.update, WHOLE_PICTURE))


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
