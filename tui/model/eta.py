"""How long a start-up has left, by the deployment's own past runs: an ETA with what it stands on, or why there is
none (no guess without past runs to go by). Computed by `tui/lifecycle/eta.py`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tui.model.phases import Phase


class EtaMatch(StrEnum):
    """Which past runs an ETA is read from: those with this run's flags, else those one flag apart (said so)."""

    SAME_FLAGS = "same-flags"
    ONE_FLAG_APART = "one-flag-apart"


@dataclass(frozen=True, slots=True)
class EtaBasis:
    """The past runs an ETA stands on: how many, how alike, and how long they took from start to ready."""

    runs: int
    match: EtaMatch
    fastest_s: float
    slowest_s: float
    #: the one flag those runs had otherwise (`--disable-cuda-graph`, `~ --tp-size 8 -> 4`), with ONE_FLAG_APART
    differs: str = ""


@dataclass(frozen=True, slots=True)
class PhaseEta:
    """The expected time left, for the current phase and until ready, from the deployment's own history, combined
    with the server's own progress where its line gives one. `slower` says a run slower than every past one."""

    phase: Phase
    phase_left_s: float
    ready_left_s: float
    basis: EtaBasis
    #: the server's own progress through the phase (0..1, a shard bar, capture batches), None when it gives none
    progress: float | None = None
    #: "loading 40 % slower than the last 3 runs", or ""
    slower: str = ""
    #: the phases taken from other runs than the basis (`graph capture ~8s from other runs on record ...`), or ""
    also: str = ""


@dataclass(frozen=True, slots=True)
class NoEta:
    """No ETA, and why: no guess is ever made without past runs to go by."""

    reason: str
