"""The flags panel: the preset's flags with their current values; space/enter toggles a switch or edits a value
(validated as typed), pending changes are listed, `u` undoes the last one, and `a` applies them (the app then asks
for confirmation and restarts). Esc closes it and says what it dropped.

A secret flag's value (`--api-key`, a flag the config declares secret: `tui/lifecycle/secrets.py`) is shown as `***`
everywhere here (its row, the pending line, the notifications) and typed into a password box: the dialog is on the
screen of whoever stands behind the operator, and in a served console's browser (issue 47)."""

from __future__ import annotations

import textwrap

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Static

from tui.guard.redact import hide
from tui.lifecycle.flags import FlagChange
from tui.lifecycle.presets import FlagSpec, FlagValueError
from tui.lifecycle.secrets import is_secret_flag, redact_value
from tui.screens.closing import ClosingModal
from tui.words import plural

TITLE = "Flags · space: toggle/edit · its key: toggle · a: apply + restart · u: undo last · esc: close"
#: the value column's widest (a longer value, a model path, is cut there; the pending line has it whole)
VALUE_MAX = 30
#: the help column's narrowest: below it the table scrolls sideways rather than fold the help word by word
ABOUT_MIN = 16
#: the value column's narrowest, when the terminal is narrow (longer values are cut; the editor shows them whole)
VALUE_MIN = 8


def title_for(target: str) -> str:
    """The dialog's title, naming what `a` will restart (`sim-d on gpu-b`) before the keys."""
    return TITLE.replace("Flags · ", f"Flags · {target} · ", 1) if target else TITLE


def shown_change(ch: FlagChange) -> str:
    """A pending change as the dialog says it (`--api-key ***`): a secret's new value hidden."""
    if ch.remove or ch.value is None:
        return ch.describe()
    return FlagChange(ch.name, redact_value(ch.name, ch.value)).describe()


def kind_text(f: FlagSpec) -> str:
    """What the flag takes: its choices, or its kind with its range."""
    if f.choices:
        return "|".join(f.choices)
    lo, hi = f.minimum, f.maximum
    if lo is None and hi is None:
        return f.kind
    if lo is not None and hi is not None:
        return f"{f.kind}, {lo:g} to {hi:g}"
    return f"{f.kind}, at least {lo:g}" if lo is not None else f"{f.kind}, at most {hi:g}"


class FlagTable(DataTable[str | Text]):
    """The flags, one row each: the row under the cursor stays in view when the table gets shorter (the value box
    opening under it takes rows from it)."""

    def on_resize(self, event: events.Resize) -> None:
        if self.row_count:
            self.move_cursor(row=self.cursor_row)


class FlagsScreen(ClosingModal[list[FlagChange] | None]):
    BINDINGS = [
        Binding("space,enter", "toggle_flag", "Toggle/edit", id="flags.toggle"),
        Binding("a", "apply", "Apply + restart", id="flags.apply"),
        Binding("u", "undo", "Undo last change", id="flags.undo"),
        Binding("escape", "cancel", "Close", id="flags.close"),
    ]

    def __init__(self, specs: list[FlagSpec], values: dict[str, str | None], favourites: list[str], *,
                 target: str = "") -> None:
        """`target`: the deployment and its host (`sim-d on gpu-b`), named in the title: `a` restarts it."""
        super().__init__()
        self.title_text = title_for(target)
        order = {n: i for i, n in enumerate(favourites)}
        self.specs = sorted(specs, key=lambda f: order.get(f.name, len(order)))
        self.values = values
        self.pending: dict[str, FlagChange] = {}
        #: each change as it was made: the flags it touched, each with its pending change before it (None: none),
        #: for `u` (a key that sets a flag and its companions is one change)
        self.history: list[tuple[tuple[str, FlagChange | None], ...]] = []
        self._editing: FlagSpec | None = None
        #: the help column's width the rows were folded to (0: not laid out yet)
        self._about_width = 0
        self._value_width = 0
        self._natural_value = 0
        #: the preset's one-letter keys (the "key" column), each toggling its flag (`on_key`)
        self.flag_keys = {f.key: f.name for f in self.specs if f.key}

    def compose(self) -> ComposeResult:
        with Vertical(id="flags-dialog"):
            # Text, not markup: the names come from the config
            yield Static(Text(self.title_text), id="dialog-title")
            yield FlagTable(id="flags-table", cursor_type="row", zebra_stripes=True)
            yield Static(id="flag-input-label", classes="hidden")
            yield Input(id="flag-input", classes="hidden")
            yield Static(id="flag-error")
            yield Static(id="pending")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self._fill(60)  # a first guess; folded again to the width the table has once laid out
        table.focus()
        self._show_pending()
        self.call_after_refresh(self._fit)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._fit)

    # ------------------------------------------------------------------ the table

    def _widths(self) -> tuple[int, int]:
        name = max([cell_len(f.name) for f in self.specs] + [4])
        value = min(VALUE_MAX, max([self._value_text(f).cell_len for f in self.specs] + [5]))
        return name, value

    def _fit(self) -> None:
        """Fold the help column to the width the table has: the table's, less the other columns and the
        scrollbar (folding can make the rows overflow, and a scrollbar appearing must not push the help out). In a
        narrow terminal the value column gives way first (down to a few cells, values cut), so the help is folded
        at words within the screen instead of running off its edge."""
        table = self.query_one(DataTable)
        if not table.size.width:
            return
        name, value = self._widths()
        pad = 2 * table.cell_padding
        avail = table.size.width - table.styles.gutter.width - table.styles.scrollbar_size_vertical
        fixed = (name + pad) + (3 + pad) + pad
        value = max(VALUE_MIN, min(value, avail - fixed - pad - ABOUT_MIN))
        about = max(ABOUT_MIN, avail - fixed - (value + pad))
        if about != self._about_width or value != self._value_width:
            self._fill(about, value)

    def _fill(self, about: int, value: int | None = None) -> None:
        """(Re)build the rows, the help folded at word boundaries to `about` columns; the cursor stays put."""
        table = self.query_one(DataTable)
        row = table.cursor_row if table.row_count else 0
        name, natural = self._widths()
        self._natural_value = natural
        value = natural if value is None else value
        self._about_width, self._value_width = about, value
        table.clear(columns=True)
        table.add_column("flag", width=name, key="flag")
        table.add_column("value", width=value, key="value")
        table.add_column("key", width=3, key="key")
        table.add_column("about", width=about, key="about")
        for f in self.specs:
            lines = textwrap.wrap(f.help, about) or [""]
            table.add_row(f.name, self._value_text(f), f.key or "", Text("\n".join(lines), style="dim"),
                          key=f.name, height=len(lines))
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1), animate=False)

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
        return Text(redact_value(f.name, value) if present and value is not None else "-", style=style)

    def _refresh_row(self, f: FlagSpec) -> None:
        if self._widths()[1] != self._natural_value:
            self._fit()  # a longer (or shorter) value: the columns are laid out again
        self.query_one(DataTable).update_cell(f.name, "value", self._value_text(f))
        self._show_pending()

    def _show_pending(self) -> None:
        lines = [shown_change(ch) for ch in self.pending.values()]
        txt = Text("pending: " + ("; ".join(lines) if lines else "none"),
                   style="bold yellow" if lines else "dim")
        self.query_one("#pending", Static).update(txt)

    def _current_spec(self) -> FlagSpec | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((f for f in self.specs if f.name == key), None)

    # ------------------------------------------------------------------ changes

    def _set(self, f: FlagSpec, change: FlagChange, *, record: bool = True) -> tuple[str, FlagChange | None] | None:
        """Make a change pending; returns the undo entry (None: nothing changed), recorded unless told not to."""
        before = self.pending.get(f.name)
        was_present = f.name in self.values
        unchanged = was_present and not change.remove and self.values.get(f.name) == change.value
        if (change.remove and not was_present) or unchanged:
            self.pending.pop(f.name, None)
        else:
            self.pending[f.name] = change
        self._refresh_row(f)
        if self.pending.get(f.name) == before:
            return None
        if record:
            self.history.append(((f.name, before),))
        return (f.name, before)

    def on_key(self, event: events.Key) -> None:
        """The preset's one-letter keys toggle their flag. They are the preset's, not this class's, so they are no
        BINDINGS: a key typed into the value box is the box's (it stops the event before it reaches the screen)."""
        name = self.flag_keys.get(event.key)
        if name is not None:
            event.stop()
            event.prevent_default()
            self.action_toggle_named(name)

    def action_toggle_named(self, name: str) -> None:
        if self._editing is not None:
            return
        table = self.query_one(DataTable)
        table.move_cursor(row=table.get_row_index(name))
        f = self._current_spec()
        if f is not None and f.kind != "bool" and f.toggle_value is not None:
            self._toggle_value(f, f.toggle_value)
            return
        self.action_toggle_flag()

    def _toggle_value(self, f: FlagSpec, value: str) -> None:
        """A key on a flag with a value (graphs off on SGLang 0.5.23: `--cuda-graph-backend-decode disabled`) sets
        that value, or removes the flag when it already has it; its companions follow, as one change for `u`."""
        present, now = self.effective(f)
        on = not (present and now == value)
        group = []
        for spec in [f, *(s for s in self.specs if s.name in f.companions)]:
            entry = self._set(spec, FlagChange(spec.name, value) if on else FlagChange(spec.name, None, remove=True),
                              record=False)
            if entry is not None:
                group.append(entry)
        if group:
            self.history.append(tuple(group))

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
        label = self.query_one("#flag-input-label", Static)
        label.update(Text.assemble(("value for ", "bold"), (f.option, "bold"),
                                   f" ({kind_text(f)}): Enter sets it, empty removes it, Esc cancels"))
        label.remove_class("hidden")
        inp = self.query_one("#flag-input", Input)
        inp.password = is_secret_flag(f.name)  # typed as dots: the value is never painted
        inp.remove_class("hidden")
        inp.placeholder = f"{f.option} ({kind_text(f)}); empty removes it"
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
                err = self._error_text(e, event.value)
        self.query_one("#flag-error", Static).update(Text(err, style="red"))

    def _error_text(self, e: FlagValueError, value: str) -> str:
        """A refusal as shown: a secret flag's value typed so far is not repeated in it."""
        f = self._editing
        text = str(e)
        return hide(text, value) if f is not None and is_secret_flag(f.name) and value else text

    def on_input_submitted(self, event: Input.Submitted) -> None:
        f = self._editing
        if f is None:
            return
        try:
            change = (FlagChange(f.name, None, remove=True) if not event.value
                      else FlagChange(f.name, f.validate(event.value)))
        except FlagValueError as e:
            self.query_one("#flag-error", Static).update(Text(self._error_text(e, event.value), style="red"))
            return
        self._close_editor()
        self._set(f, change)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_toggle_flag()

    def _close_editor(self) -> None:
        self._editing = None
        self.query_one("#flag-input", Input).add_class("hidden")
        self.query_one("#flag-input-label", Static).add_class("hidden")
        self.query_one("#flag-error", Static).update("")
        self.query_one(DataTable).focus()

    def action_undo(self) -> None:
        """Undo the last change (a toggle or an edit), one per press, and say which."""
        if self._editing is not None:
            return
        if not self.history:
            self.notify("nothing to undo: no pending change", timeout=4)
            return
        group = self.history.pop()
        for name, before in reversed(group):
            if before is None:
                self.pending.pop(name, None)
            else:
                self.pending[name] = before
            self._refresh_row(next(f for f in self.specs if f.name == name))
        name = group[0][0]
        f = next(f for f in self.specs if f.name == name)
        table = self.query_one(DataTable)
        table.move_cursor(row=table.get_row_index(name))
        also = f" (and --{', --'.join(n for n, _ in group[1:])})" if len(group) > 1 else ""
        self.notify(f"undone: the last change to --{name}{also}; it is {self._value_text(f).plain} "
                    f"{'(still pending)' if name in self.pending else 'as on the server'}", timeout=4, markup=False)

    def action_apply(self) -> None:
        if self._editing is not None:
            return
        if not self.pending:
            self.notify("nothing to apply: no pending change (space toggles or edits the flag under the cursor)",
                        severity="warning", timeout=5)
            return
        self.dismiss(list(self.pending.values()))

    def action_cancel(self) -> None:
        """Esc closes the editor, or the dialog; pending changes are dropped, and the notification says so (nothing
        was changed on the server: making them again is a few keys)."""
        if self._editing is not None:
            self._close_editor()
            return
        n = len(self.pending)
        if n:
            what = "; ".join(shown_change(ch) for ch in self.pending.values())
            self.notify(f"{plural(n, 'pending flag change')} dropped ({what}): nothing was changed on the server",
                        severity="warning", timeout=6, markup=False)  # values are the user's text
        self.dismiss(None)
