"""Each collector's last error, kept until it reads again: a note in every snapshot while it lasts, and told to the
listeners once, as it happens.

Its own object, handed to each stream, so a stream files its errors without reaching back into the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping

from tui.model import Note, NoteSource


class CollectorErrors(MutableMapping[str, str]):
    """Keyed by the collector's name (a `NoteSource`: unit, logs, probe, gpus, metrics, news)."""

    def __init__(self, told: Callable[[Note], None]) -> None:
        self._told = told
        self._errors: dict[str, str] = {}

    def failed(self, collector: str, error: str) -> None:
        """The collector could not read its source: kept, and told (a console shows it at once)."""
        self._errors[collector] = error
        self._told(Note(NoteSource(collector), f"{collector}: {error}"))

    def cleared(self, collector: str) -> None:
        """The collector read again: its error is old news."""
        self._errors.pop(collector, None)

    def __getitem__(self, collector: str) -> str:
        return self._errors[collector]

    def __setitem__(self, collector: str, error: str) -> None:  # kept without telling (a GPU sample's own error)
        self._errors[collector] = error

    def __delitem__(self, collector: str) -> None:
        del self._errors[collector]

    def __iter__(self) -> Iterator[str]:
        return iter(self._errors)

    def __len__(self) -> int:
        return len(self._errors)
