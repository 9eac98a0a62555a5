"""The ETA as the headless commands print it: `status --json`'s `eta_s` (seconds until ready, null when there is
no ETA) and `based_on` (the past runs it stands on), and the one line `status` and `wait` say."""

from __future__ import annotations

from typing import Any

from tui.lifecycle.eta import based_on_words, eta_words
from tui.model import NoEta, PhaseEta


def eta_fields(eta: PhaseEta | NoEta | None) -> dict[str, Any]:
    """`eta_s`, `phase_eta_s`, `based_on` and `eta` (the line in words; null when no run is starting)."""
    if eta is None:
        return {"eta_s": None, "phase_eta_s": None, "based_on": None, "eta": None}
    if isinstance(eta, NoEta):
        return {"eta_s": None, "phase_eta_s": None, "based_on": None, "eta": eta_words(eta)}
    b = eta.basis
    return {"eta_s": eta.ready_left_s, "phase_eta_s": eta.phase_left_s,
            "based_on": {"runs": b.runs, "match": str(b.match), "differs": b.differs or None,
                         "fastest_s": round(b.fastest_s, 1), "slowest_s": round(b.slowest_s, 1),
                         "words": based_on_words(b)},
            "progress": eta.progress, "slower": eta.slower or None, "eta": eta_words(eta)}
