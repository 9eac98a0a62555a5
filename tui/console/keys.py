"""The console's keys as the user sees them: the key bar, the help screen's list and the command palette, each
listing the keys the console's own classes declare, as currently mapped."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from tui.screens.help import HelpScreen


class ConsoleKeys(App[int]):
    """The key bar, help and palette of the console; the console's classes derive from it and declare the keys."""

    read_only: bool

    def _show_keys(self, width: int | None = None) -> None:
        """The key bar: the console's keys as mapped, drawn once and on a resize. (Textual's Footer recomposes
        itself whenever the focus moves, which during a log burst made `/` take a third longer to show and the
        log fall behind.) Where the full labels do not fit (90 columns), each label is its first word, so that
        every key still shows rather than the last ones being cut off."""
        rows = self.key_rows(shown_only=True)
        width = width or self.size.width or 200
        for short in (False, True):
            t = Text()
            for key, desc in rows:
                if short:
                    t.append(f"{key}", style="bold")
                    t.append(f" {desc.split('/')[0].split()[0].lower()} ")
                else:
                    t.append(f" {key} ", style="bold")
                    t.append(f"{desc} ")
            t.append(" ^p palette" if not short else " ^p", style="dim")
            if t.cell_len <= width:
                break
        self.query_one("#keys", Static).update(t)

    def on_resize(self, event: events.Resize) -> None:
        with contextlib.suppress(NoMatches):
            self._show_keys(event.size.width)

    def help_rows(self) -> list[tuple[str, str]]:
        rows = self.key_rows()  # each key once: the bar's keys and those it leaves out (Esc, End)
        if not any(k == "end" for k, _ in rows):  # the focused log's own End binding shadows ours: it does the same
            rows.append(("end", "Follow the log again after scrolling up"))
        return rows

    @classmethod
    def _own_bindings(cls) -> list[Binding]:
        """The bindings the console's classes declare, the most derived class's first (the full console adds its
        own to the read-only one's), not Textual's."""
        return [b for c in cls.__mro__ if issubclass(c, ConsoleKeys)
                for b in c.__dict__.get("BINDINGS", ()) if isinstance(b, Binding)]

    def key_rows(self, shown_only: bool = False) -> list[tuple[str, str]]:
        """The console's own keys, as currently mapped (Textual's scrolling and copy keys are not listed: they
        work as in any Textual app, and listing them first buried the keys that matter)."""
        ours = {b.id for b in self._own_bindings()}
        rows = []
        for _key, bindings in self.active_bindings.items():
            b = bindings.binding
            if b.description and b.id in ours and (b.show or not shown_only):
                rows.append((self.get_key_display(b), b.description))
        return rows

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_rows(), self.read_only))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette offers every key of the console (the full console's class adds its own to the read-only
        one's: both lists, not just the subclass's), each with the key that does it."""
        yield from super().get_system_commands(screen)
        seen: set[str] = set()
        for b in self._own_bindings():
            if b.description and b.action not in ("quit",) and b.action not in seen:
                seen.add(b.action)
                yield SystemCommand(b.description, f"the {self.get_key_display(b)} key",
                                    getattr(self, f"action_{b.action}", None) or (lambda: None))

