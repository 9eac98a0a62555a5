"""Textual messages the console routes, named as past events. They carry plain data only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.message import Message

from tui.model import GpuSnapshot, LockInfo, LogLine, Outcome, Snapshot, Step, ThroughputSample


class PhaseChanged(Message):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class LogsArrived(Message):
    def __init__(self, lines: Sequence[LogLine]) -> None:
        super().__init__()
        self.lines = lines


class GpusSampled(Message):
    def __init__(self, snapshot: GpuSnapshot, history: Mapping[int, Sequence[float]]) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.history = history


class ThroughputSampled(Message):
    def __init__(self, sample: ThroughputSample, history: Sequence[tuple[float, float]]) -> None:
        super().__init__()
        self.sample = sample
        self.history = history


class CollectorFailed(Message):
    def __init__(self, collector: str, error: str) -> None:
        super().__init__()
        self.collector = collector
        self.error = error


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


class OtherClientActed(Message):
    """Another bringup took or let go of the deployment's lock: a restart, start or stop not made here. `holder`:
    who and what (None: it has finished)."""

    def __init__(self, holder: LockInfo | None) -> None:
        super().__init__()
        self.holder = holder
