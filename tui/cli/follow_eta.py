"""The ETA on `start`'s and `restart`'s follow lines, as `wait` puts it on its phase lines (issue 51: only `wait`
and `status` said it, so an operator who restarted had to open another terminal to learn how long to wait).

Each follow step that names a start-up phase gets the ETA as it stood when the run entered that phase (the
engine's `history.on_entry`, the one `wait` asks); "no ETA: ..." is said once a command, as `wait` says it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tui.lifecycle.eta import eta_words
from tui.lifecycle.history import startup_phases
from tui.lifecycle.reducer import LifecycleState
from tui.model import NoEta, Phase, PhaseEta, Step, StepStatus

from .eta_report import eta_fields

#: the ETA of a run as it stood when it entered a phase at a moment (RunRecorder.on_entry, bound to its engine)
OnEntry = Callable[[Phase, float], PhaseEta | NoEta | None]


class FollowEta:
    def __init__(self, on_entry: OnEntry, state: Callable[[], LifecycleState]) -> None:
        self._on_entry = on_entry
        self._state = state
        self._no_eta_said = False

    def of(self, step: Step) -> PhaseEta | NoEta | None:
        """The ETA for a follow step naming the start-up phase the run has just entered; None for any other."""
        if step.name != "follow" or step.status != StepStatus.RUNNING:
            return None
        phase = next((p for p in startup_phases() if str(p) == step.detail), None)
        timeline = self._state().timeline
        if phase is None or not timeline or timeline[-1].phase != phase:
            return None
        eta = self._on_entry(phase, timeline[-1].at)
        if isinstance(eta, NoEta):
            if self._no_eta_said:
                return None
            self._no_eta_said = True
        return eta

    def words(self, eta: PhaseEta | NoEta | None) -> str:
        return f"  [{eta_words(eta)}]" if eta is not None else ""

    def fields(self, eta: PhaseEta | NoEta | None) -> dict[str, Any]:
        return eta_fields(eta) if eta is not None else {}
