"""The flags panel: the preset's flags with their current values; space/enter toggles a switch or edits a value
(validated as typed), pending changes are listed, and `a` applies them (the app then asks for confirmation and
restarts)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

from tui.lifecycle.flags import FlagChange
from tui.lifecycle.presets import FlagSpec, FlagValueError


class FlagsScreen(ModalScreen[list[FlagChange] | None]):
    BINDINGS = [
        Binding("space,enter", "toggle_flag", "Toggle/edit", id="flags.toggle"),
        Binding("a", "apply", "Apply + restart", id="flags.apply"),
        Binding("u", "undo", "Undo pending", id="flags.undo"),
        Binding("escape", "cancel", "Close", id="flags.close"),
    ]

    def __init__(self, specs: list[FlagSpec], values: dict[str, str | None], favourites: list[str]) -> None:
        super().__init__()
        order = {n: i for i, n in enumerate(favourites)}
        self.specs = sorted(specs, key=lambda f: order.get(f.name, len(order)))
        self.values = values
        self.pending: dict[str, FlagChange] = {}
        self._editing: FlagSpec | None = None
        for f in self.specs:  # the preset's one-letter keys (the "key" column) toggle their flag
            if f.key:
                self._bindings.bind(f.key, f"toggle_named({f.name!r})", f"Toggle {f.name}", show=False)

    def compose(self) -> ComposeResult:
        with Vertical(id="flags-dialog"):
            yield Static("Flags · space: toggle/edit · its key: toggle · a: apply + restart · u: undo · esc: close",
                         id="dialog-title")
            yield DataTable(id="flags-table", cursor_type="row", zebra_stripes=True)
            yield Input(id="flag-input", classes="hidden")
            yield Static(id="flag-error")
            yield Static(id="pending")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("flag", "value", "key", "about")
        for f in self.specs:
            table.add_row(f.name, self._value_text(f), f.key or "", Text(f.help, style="dim"), key=f.name)
        table.focus()
        self._show_pending()

    def effective(self, f: FlagSpec) -> tuple[bool, str | None]:
        """(present, value) after pending changes."""
        ch = self.pending.get(f.name)
        if ch is not None:
            return (not ch.remove, ch.value)
        return (f.name in self.values, self.values.get(f.name))

    def _value_text(self, f: FlagSpec) -> Text:
        present, value = self.effective(f)
        pending = f.name in self.pending
        style = "bold yellow" if pending else ""
        if f.kind == "bool":
            return Text("on" if present else "off", style=style or ("green" if present else "dim"))
        return Text(value if present and value is not None else "-", style=style)

    def _refresh_row(self, f: FlagSpec) -> None:
        table = self.query_one(DataTable)
        table.update_cell(f.name, table.ordered_columns[1].key, self._value_text(f))
        self._show_pending()

    def _show_pending(self) -> None:
        lines = [ch.describe() for ch in self.pending.values()]
        txt = Text("pending: " + ("; ".join(lines) if lines else "none"),
                   style="bold yellow" if lines else "dim")
        self.query_one("#pending", Static).update(txt)

    def _current_spec(self) -> FlagSpec | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((f for f in self.specs if f.name == key), None)

    def _set(self, f: FlagSpec, change: FlagChange) -> None:
        was_present = f.name in self.values
        unchanged = was_present and not change.remove and self.values.get(f.name) == change.value
        if (change.remove and not was_present) or unchanged:
            self.pending.pop(f.name, None)
        else:
            self.pending[f.name] = change
        self._refresh_row(f)

    def action_toggle_named(self, name: str) -> None:
        if self._editing is not None:
            return
        table = self.query_one(DataTable)
        table.move_cursor(row=table.get_row_index(name))
        self.action_toggle_flag()

    def action_toggle_flag(self) -> None:
        if self._editing is not None:
            return
        f = self._current_spec()
        if f is None:
            return
        present, value = self.effective(f)
        if f.kind == "bool":
            self._set(f, FlagChange(f.name, None, remove=present))
            return
        self._editing = f
        inp = self.query_one("#flag-input", Input)
        inp.remove_class("hidden")
        hint = "|".join(f.choices) if f.choices else f.kind
        inp.placeholder = f"--{f.name} ({hint}); empty removes it; Esc cancels"
        inp.value = value or ""
        inp.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._editing is None:
            return
        err = ""
        if event.value:
            try:
                self._editing.validate(event.value)
            except FlagValueError as e:
                err = str(e)
        self.query_one("#flag-error", Static).update(Text(err, style="red"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        f = self._editing
        if f is None:
            return
        try:
            change = (FlagChange(f.name, None, remove=True) if not event.value
                      else FlagChange(f.name, f.validate(event.value)))
        except FlagValueError as e:
            self.query_one("#flag-error", Static).update(Text(str(e), style="red"))
            return
        self._close_editor()
        self._set(f, change)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_toggle_flag()

    def _close_editor(self) -> None:
        self._editing = None
        inp = self.query_one("#flag-input", Input)
        inp.add_class("hidden")
        self.query_one("#flag-error", Static).update("")
        self.query_one(DataTable).focus()

    def action_undo(self) -> None:
        self.pending.clear()
        for f in self.specs:
            self._refresh_row(f)

    def action_apply(self) -> None:
        if self._editing is None:
            self.dismiss(list(self.pending.values()))

    def action_cancel(self) -> None:
        if self._editing is not None:
            self._close_editor()
            return
        self.dismiss(None)
