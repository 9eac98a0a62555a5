"""The console's keys as the user sees them: the key bar, the help screen's list and the command palette, each
listing the keys the console's own classes declare, as currently mapped; and, in the read-only console, the keys of
the actions it leaves out, which say so instead of doing nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, ClassVar

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

    #: the full console's action keys, in the read-only console: each says it is off there rather than doing
    #: nothing (the full console's own bindings of these keys replace them). No description: neither the bar, the
    #: help nor the palette lists them (the help says read-only mode is on); the same ids, so a remapped key moves
    #: with the action it stands for
    BINDINGS = [
        Binding("r", "read_only('restart')", "", show=False, id="restart"),
        Binding("f", "read_only('flag changes')", "", show=False, id="flags"),
        Binding("s", "read_only('start/stop')", "", show=False, id="start_stop"),
    ]

    #: the key bar's order: the actions that change the deployment first, then the viewing keys, help and quit
    #: last (ids; keys not named keep their declared order, after these)
    BAR_ORDER: ClassVar[tuple[str, ...]] = ("restart", "flags", "start_stop", "filter", "errors", "pause", "pick")
    #: where even one-word labels do not fit (80 columns), these keys leave the bar first, in this order; help,
    #: quit and the palette always stay (help and the palette list every key)
    BAR_DROP: ClassVar[tuple[str, ...]] = ("pick", "pause", "errors", "filter", "start_stop", "flags", "restart")
    #: one-word labels where the first word would mislead ("start" for a key that stops a running server)
    BAR_SHORT: ClassVar[dict[str, str]] = {"start_stop": "start/stop"}

    def action_read_only(self, what: str) -> None:
        self.notify(f"read-only: no {what} from this console (started with --read-only, or read_only = true in the "
                    "config); without it, the key does it", severity="warning", timeout=6, markup=False)

    def _bar(self, rows: list[tuple[str, str, str]], short: bool, width: int) -> Text:
        t = Text(" " if short else "")  # the full labels begin with a space of their own
        for bid, key, desc in rows:
            if short:
                t.append(f"{key}", style="bold")
                t.append(f" {self.BAR_SHORT.get(bid) or desc.split('/')[0].split()[0].lower()} ")
            else:
                t.append(f" {key} ", style="bold")
                t.append(f"{desc} ")
        t.append(" ^p palette" if not short or t.cell_len + 11 <= width else " ^p", style="dim")
        return t

    def _show_keys(self, width: int | None = None) -> None:
        """The key bar: the console's keys as mapped, drawn once and on a resize. (Textual's Footer recomposes
        itself whenever the focus moves, which during a log burst made `/` take a third longer to show and the
        log fall behind.) Where the full labels do not fit (90 columns), each label is one word, so that every key
        still shows rather than the last ones being cut off; where those do not fit either (80 columns), the least
        needed keys leave the bar (BAR_DROP), never help, quit or the palette."""
        rows = self._bar_rows()
        width = width or self.size.width or 200
        t = self._bar(rows, False, width)
        if t.cell_len > width:
            t = self._bar(rows, True, width)
        for bid in self.BAR_DROP:
            if t.cell_len <= width:
                break
            rows = [r for r in rows if r[0] != bid]
            t = self._bar(rows, True, width)
        self.query_one("#keys", Static).update(t)

    def _bar_rows(self) -> list[tuple[str, str, str]]:
        """(id, key, label) of each key the bar shows, in its order (BAR_ORDER)."""
        rows = [(b.id or "", self.get_key_display(b), b.description) for b in self._mapped(shown_only=True)]
        rank = {bid: i for i, bid in enumerate(self.BAR_ORDER)}
        return sorted(rows, key=lambda r: rank.get(r[0], len(rank)))

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

    def _mapped(self, shown_only: bool = False) -> list[Binding]:
        """The console's own bindings that have a description, as currently mapped (Textual's scrolling and copy
        keys are not among them: they work as in any Textual app, and listing them first buried the keys that
        matter)."""
        ours = {b.id for b in self._own_bindings()}
        return [b for b in (ab.binding for ab in self.active_bindings.values())
                if b.description and b.id in ours and (b.show or not shown_only)]

    def key_rows(self, shown_only: bool = False) -> list[tuple[str, str]]:
        """The console's own keys, as currently mapped."""
        return [(self.get_key_display(b), b.description) for b in self._mapped(shown_only)]

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



def declared_keys(cls: type) -> dict[str, str]:
    """Binding id -> its declared key, over a console class and the classes it derives from (the subclass's
    binding of an id wins, as in Textual)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for b in vars(klass).get("BINDINGS", ()):
            if isinstance(b, Binding) and b.id:
                out[b.id] = b.key
    return out


def keymap_problem(scopes: Iterable[type], keys: dict[str, str]) -> str:
    """What is wrong with `[ui] keys` for the console, in one line ("" when nothing): an action none of its
    `scopes` (the app's class, its screens' classes) has -- a typo there would leave the key as it was without a
    word -- or two actions of one scope on one key (Textual would silently take one of them, and the other, restart
    say, would have no key at all)."""
    from tui.config import did_you_mean

    declared = [declared_keys(c) for c in scopes]
    known = {a for d in declared for a in d}
    for action in keys:
        if action not in known:
            return (f"[ui] keys: no action {action!r}{did_you_mean(action, known)}; the actions are: "
                    f"{', '.join(sorted(known))}")
    for scope in declared:
        by_key: dict[str, list[str]] = {}
        for action, key in scope.items():
            for k in keys.get(action, key).split(","):
                by_key.setdefault(k.strip(), []).append(action)
        for key, actions in by_key.items():
            if len(actions) > 1 and any(a in keys for a in actions):
                which = " and ".join(f"{a}{'' if a in keys else ' (its default)'}" for a in actions)
                return f"[ui] keys: {key!r} is the key of both {which}: give one of them another key"
    return ""
