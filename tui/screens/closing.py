"""A dialog that lets go of what it drew when it closes.

Textual keeps the style caches of widgets that are gone: `StylesCache.get_inner_outer` is an `lru_cache` on a method,
so up to 1,024 of them stay referenced (Textual's open issue #6665), each holding the rows its widget last rendered.
A dialog opened and closed all day (the restart's confirmation, the sweep view, help) then grows the console by what
it drew, every time: measured, 1.2 MiB kept per opening of the sweep view, and the console's RSS grew 1.6 MiB a
minute in an hour-long soak that opened it every minute. A widget's `refresh()` (Textual's public API) empties its
cache, so the entries kept hold next to nothing: 0.28 MiB per opening, plotext's figures of its charts.
"""

from __future__ import annotations

from typing import TypeVar

from textual.await_complete import AwaitComplete
from textual.screen import ModalScreen

ResultT = TypeVar("ResultT")


class ClosingModal(ModalScreen[ResultT]):
    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        for widget in self.walk_children(with_self=True):
            widget.refresh()  # its style cache emptied, before the screen goes
        return super().dismiss(result)
