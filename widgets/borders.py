"""A panel's border title and subtitle, written only when their words change.

Textual repaints the whole widget each time either is set, even to the words it already shows: a panel whose
subtitle is set on every refresh tick is redrawn, lines and all, every second, which was most of what the console
wrote to the terminal. Both are set from plain text, never read as markup (a filter the user typed, a unit's name).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from rich.text import Text
from textual.widget import Widget

#: the border subtitle of a panel while it fills the screen (Textual's maximize: Esc restores it)
RESTORE_HINT = "Esc to restore"

#: what each widget's border shows now, as set through here: (title, subtitle)
_SHOWN: WeakKeyDictionary[Widget, tuple[str | None, str | None]] = WeakKeyDictionary()


def set_border(widget: Widget, *, title: str | None = None, subtitle: str | None = None) -> None:
    """Set the title and/or the subtitle (None: leave it as it is) to plain `title`/`subtitle`, each only if it
    changed."""
    was_title, was_subtitle = _SHOWN.get(widget, (None, None))
    if title is not None and title != was_title:
        widget.border_title = Text(title)
        was_title = title
    if subtitle is not None and subtitle != was_subtitle:
        widget.border_subtitle = Text(subtitle)
        was_subtitle = subtitle
    _SHOWN[widget] = (was_title, was_subtitle)
