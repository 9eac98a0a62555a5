"""A widget's words, written only when they change: a panel's border title and subtitle, a Static's text.

Textual repaints the whole widget each time a border title or subtitle is set, even to the words it already shows: a
panel whose subtitle is set on every refresh tick is redrawn, lines and all, every second, which was most of what the
console wrote to the terminal. Border words are set from plain text, never read as markup (a filter the user typed,
a unit's name). A Static's update lays out the screen unless told otherwise: `set_text` asks for a layout only when
its number of lines changed.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from rich.text import Span, Text
from textual.widget import Widget
from textual.widgets import Static

#: the border subtitle of a panel while it fills the screen (Textual's maximize: Esc restores it)
RESTORE_HINT = "Esc to restore"

#: what each widget's border shows now, as set through here: (title, subtitle)
_BORDERS: WeakKeyDictionary[Widget, tuple[str | None, str | None]] = WeakKeyDictionary()


def set_border(widget: Widget, *, title: str | None = None, subtitle: str | None = None) -> None:
    """Set the title and/or the subtitle (None: leave it as it is) to plain `title`/`subtitle`, each only if it
    changed."""
    was_title, was_subtitle = _BORDERS.get(widget, (None, None))
    if title is not None and title != was_title:
        widget.border_title = Text(title)
        was_title = title
    if subtitle is not None and subtitle != was_subtitle:
        widget.border_subtitle = Text(subtitle)
        was_subtitle = subtitle
    _BORDERS[widget] = (was_title, was_subtitle)


#: what each Static was last given through `set_text`: its text, the text's styles and its number of lines
_TEXTS: WeakKeyDictionary[Static, tuple[str, list[Span], int]] = WeakKeyDictionary()


def set_text(widget: Static, text: Text | str) -> None:
    """Update a Static only when its text changed, and re-layout only when its number of lines did: a full
    layout per refresh tick is most of an idle console's CPU."""
    plain = text.plain if isinstance(text, Text) else text
    old = _TEXTS.get(widget)
    if old is not None and old[0] == plain and (not isinstance(text, Text) or old[1] == text.spans):
        return
    width = widget.content_region.width if widget.is_mounted else 0
    rich = text if isinstance(text, Text) else Text(text)
    rows = len(rich.wrap(widget.app.console, width)) if width > 0 else plain.count("\n") + 1  # as displayed
    _TEXTS[widget] = (plain, rich.spans, rows)
    widget.update(text, layout=old is None or old[2] != rows)
