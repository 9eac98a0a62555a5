"""The one key bar of the console's screens (the console's and the overview's): a line of keys that always fits.

Textual's Footer recomposes itself whenever the focus moves (during a log burst, `/` took a third longer to show);
this bar is a `Text` drawn once and on a resize. Each screen gives its keys and the ways it may lay them out, widest
first; the bar takes the first that fits, else the last with the least needed keys left out one by one (`drop`), so
that a key is shown whole or not at all, never cut off at the edge. Pure: a test can fit a bar without an app.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text


@dataclass(frozen=True, slots=True)
class BarKey:
    """One key of the bar: its binding's id (what `drop` names), the key as mapped now, and its label."""

    id: str
    key: str
    label: str


#: a way of laying the keys out: which keys (some may merge into one entry) and how they are drawn
Shape = Callable[[list[BarKey]], list[BarKey]]
Draw = Callable[[list[BarKey]], Text]


def as_is(keys: list[BarKey]) -> list[BarKey]:
    return keys


def fit(keys: Sequence[BarKey], width: int, layouts: Sequence[tuple[Shape, Draw]], drop: Sequence[str]) -> Text:
    """The first of `layouts` whose bar fits `width`; else the last one's, leaving out the keys of `drop` in its
    order until it fits (or none of them is left)."""
    shaped, draw = list(keys), layouts[-1][1]
    t = Text()
    for shape, draw in layouts:
        shaped = shape(list(keys))
        t = draw(shaped)
        if t.cell_len <= width:
            return t
    for bid in drop:
        if t.cell_len <= width:
            break
        shaped = [k for k in shaped if k.id != bid]
        t = draw(shaped)
    return t
