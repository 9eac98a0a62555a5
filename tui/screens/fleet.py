"""The fleet overview, k9s-style: every deployment in one table; sort by name, host or phase, filter with `/`,
Enter opens the selected deployment's console (Esc there comes back here: the two are the app's modes), and the
keys that act (restart, flags, start/stop) act on the selected row through the console's own actions and
confirmations.

The screen reads rows from a function the console gives it (plain `FleetRow`s, no engine here), at each tick of the
console's one timer while it is shown (it has none of its own); the table redraws only the rows whose text changed.
Acting and opening are messages to the console, which owns the engines and the dialogs: the same confirmation names the
deployment and its host, and the read-only console's keys say they are off, here as there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Static

from tui.screens.help import HelpScreen
from widgets import keybar
from widgets.fleet import FleetTable
from widgets.fleet_rows import FleetRow, SortKey
from widgets.keybar import BarKey

#: the keys the key bar shows, in its order: (binding id, one-word label)
_BAR = (("restart", "restart"), ("flags", "flags"), ("start_stop", "start/stop"), ("fleet.open", "open"),
        ("fleet.filter", "filter"), ("fleet.sort_name", "name"), ("fleet.sort_host", "host"),
        ("fleet.sort_phase", "phase"), ("fleet.help", "help"), ("fleet.quit", "quit"))
#: the sort keys, as one entry of the bar where the whole bar does not fit (80 columns): "N/H/P sort"
_SORTS = ("fleet.sort_name", "fleet.sort_host", "fleet.sort_phase")
#: where even that does not fit, these leave the bar, in this order (help lists every key; help and quit stay)
_BAR_DROP = ("fleet.sort", "fleet.filter", "fleet.open", "start_stop", "flags", "restart")


class FleetScreen(Screen[None]):
    """The app's overview mode, beside the console's (tui/console/viewer.py): the console's own keys, which act on
    the deployment it shows, are not active here; here the same keys act on the selected row."""

    AUTO_FOCUS = "#fleet-table"
    BINDINGS = [
        Binding("enter", "open", "Open the selected deployment's console (Esc there comes back)", id="fleet.open"),
        Binding("slash", "filter", "Filter by name, host or phase", id="fleet.filter"),
        Binding("escape", "clear_filter", "Clear the filter", show=False, id="fleet.escape"),
        Binding("N", "sort('name')", "Sort by name (again: reverse)", id="fleet.sort_name"),
        Binding("H", "sort('host')", "Sort by host (again: reverse)", id="fleet.sort_host"),
        Binding("P", "sort('phase')", "Sort by phase, failed first (again: reverse)", id="fleet.sort_phase"),
        # the console's ids: a key remapped there ([ui] keys) is remapped here too
        Binding("r", "act('restart')", "Restart the selected deployment", id="restart"),
        Binding("f", "act('flags')", "Flags of the selected deployment", id="flags"),
        Binding("s", "act('start_stop')", "Start/stop the selected deployment", id="start_stop"),
        Binding("question_mark", "help", "Help", id="fleet.help"),
        Binding("q", "app.quit", "Quit", id="fleet.quit"),
    ]

    class Ticked(Message):
        """The console's one timer ticked while this screen is shown: the rows as of now."""

    class OpenAsked(Message):
        """Enter on a row: the console shows that deployment."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    class ActionAsked(Message):
        """An acting key on a row: `action` is the console binding's id (restart, flags, start_stop)."""

        def __init__(self, name: str, action: str) -> None:
            super().__init__()
            self.name = name
            self.action = action

    def __init__(self, rows: Callable[[], Sequence[FleetRow]], *, read_only: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.rows = rows
        self.read_only = read_only
        self.clock = clock
        self._titled: tuple[str, str] | None = None

    @property
    def table(self) -> FleetTable:
        return self.query_one(FleetTable)

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: name, host or phase (Enter keeps it, Esc clears)", id="fleet-filter",
                    classes="hidden")
        yield FleetTable(id="fleet-table")
        yield Static(id="fleet-keys")

    def on_mount(self) -> None:
        self.table.border_title = "Deployments"
        self.update_rows()
        self._show_keys()

    def on_screen_resume(self) -> None:
        """Back from a deployment's console: the rows as they are now, not as they were when it opened."""
        self.update_rows()

    def on_fleet_screen_ticked(self, m: Ticked) -> None:
        m.stop()
        self.update_rows()

    def update_rows(self) -> None:
        """The rows as of now: at mount, on resume, and at each tick of the console's one timer while this screen
        is shown (a timer of its own woke the process every second, hidden or not)."""
        if self.is_attached and self in self.app.screen_stack:  # not while the console shows a deployment
            self.table.show(self.rows(), self.clock())
            self._title()

    def _title(self) -> None:
        t = self.table
        what = f"{len(t.shown)} of {len(t.rows)}" if t.filter_text else f"{len(t.rows)}"
        order = f"by {t.sort_key}{' (reversed)' if t.reverse else ''}"
        flt = f"  /{t.filter_text}" if t.filter_text else ""
        title, subtitle = f"Deployments ({what})", f"{order}{flt}{'  [read-only]' if self.read_only else ''}"
        if (title, subtitle) == self._titled:
            return  # setting a border title repaints the whole table, every row: only when it changes
        self._titled = (title, subtitle)
        t.border_title = title
        # Content, not a str: a str is read as markup, and the filter is the operator's text
        t.border_subtitle = Content(subtitle)

    def on_resize(self, event: events.Resize) -> None:
        self._show_keys(event.size.width)

    def _show_keys(self, width: int | None = None) -> None:
        """The key bar: every key with a one-word label where it fits; else the sort keys as one entry, then the
        least needed keys leave it (_BAR_DROP), never help or quit: each key stays whole, none is cut off."""
        bindings = {b.id: b for b in self.BINDINGS if isinstance(b, Binding)}
        bindings |= {ab.binding.id: ab.binding for ab in self.active_bindings.values()}  # as remapped
        keys = [BarKey(bid, self.app.get_key_display(bindings[bid]), label) for bid, label in _BAR]

        def bar(entries: list[BarKey]) -> Text:
            t = Text()
            for k in entries:
                t.append(f" {k.key}", style="bold")
                t.append(f" {k.label} ")
            return t

        def sorts_as_one(entries: list[BarKey]) -> list[BarKey]:
            first = next(i for i, k in enumerate(entries) if k.id in _SORTS)
            merged = BarKey("fleet.sort", "/".join(k.key for k in entries if k.id in _SORTS), "sort")
            rest = [k for k in entries if k.id not in _SORTS]
            return [*rest[:first], merged, *rest[first:]]

        t = keybar.fit(keys, width or self.size.width or 200, [(keybar.as_is, bar), (sorts_as_one, bar)], _BAR_DROP)
        self.query_one("#fleet-keys", Static).update(t)

    # ------------------------------------------------------------------ keys

    def on_fleet_table_chosen(self, m: FleetTable.Chosen) -> None:
        m.stop()
        self.post_message(self.OpenAsked(m.name))

    def action_open(self) -> None:
        if (row := self.table.selected) is not None:
            self.post_message(self.OpenAsked(row.name))

    def action_act(self, action: str) -> None:
        row = self.table.selected
        if row is None:
            self.notify("no deployment selected", severity="warning")
            return
        self.post_message(self.ActionAsked(row.name, action))

    def action_sort(self, key: SortKey) -> None:
        self.table.set_sort(key)
        self._title()

    def action_filter(self) -> None:
        inp = self.query_one("#fleet-filter", Input)
        inp.remove_class("hidden")
        inp.value = self.table.filter_text
        inp.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """The rows narrow as the filter is typed."""
        if event.input.id == "fleet-filter":
            self.table.set_filter(event.value)
            self._title()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "fleet-filter":
            event.input.add_class("hidden")
            self.table.focus()

    def action_clear_filter(self) -> None:
        inp = self.query_one("#fleet-filter", Input)
        inp.value = ""
        inp.add_class("hidden")
        self.table.set_filter("")
        self.table.focus()
        self._title()

    def action_help(self) -> None:
        rows = [(self.app.get_key_display(b), b.description) for b in self.BINDINGS
                if isinstance(b, Binding) and b.description]
        rows.insert(0, ("up/down", "Select a deployment"))
        self.app.push_screen(HelpScreen(rows, self.read_only))
