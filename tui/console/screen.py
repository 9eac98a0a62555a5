"""The console's screen: its four panels (lifecycle, GPUs, log, throughput), its keys and its key bar.

The screen owns what is drawn and which keys exist: it draws its own panels from what the app gives it (a `Shown`,
tui/console/shown.py, and the moment), holding its panels from `compose`, so no query of the app's can miss them on
another screen. The app (tui/console/viewer.py) owns the deployment: its engine, what the engine reported, the
actions that need it; it subscribes and routes. So the keys that act on the deployment are bound here to the
app's actions (`app.pause`, `app.restart`), and the log panel's own keys (filter, errors/all, wrap, follow) are done
here. The read-only console's screen binds the acting keys to a refusal that says so; the full console's screen
(`ControlConsoleScreen`) binds them to the app's actions, so in read-only mode those actions are never reached.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, ParamSpec

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from tui.console.gate import REFUSAL
from tui.console.shown import Shown
from tui.lifecycle.lines import LineKind
from tui.model import LogLine, NamedHolder, Phase, Snapshot, Step
from tui.screens.help import HelpScreen
from widgets import keybar
from widgets.error_log import FILTER_EDITING, FILTER_IDLE, ErrorLog
from widgets.gpus import GpuPanel
from widgets.header import ConsoleHeader
from widgets.keybar import BarKey
from widgets.lifecycle import LifecyclePanel
from widgets.throughput import ThroughputPanel
from widgets.written import RESTORE_HINT, set_border

P = ParamSpec("P")


def _panels_there(draw: Callable[P, None]) -> Callable[P, None]:
    """A drawing of the screen's panels that does nothing once their parts are gone: the app closing removes them,
    and an update of the engine may still arrive then (the panels are the screen's own: only then can one be
    missing)."""
    @functools.wraps(draw)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> None:
        with contextlib.suppress(NoMatches):
            draw(*args, **kwargs)

    return drawn


class ConsoleScreen(Screen[None]):
    """The read-only console's screen: watching, filtering and help; the acting keys only say they are off."""

    AUTO_FOCUS = "#log"
    #: below 100 columns the log takes the left half: the toasts keep to the right half (app.tcss), over the
    #: throughput panel, so that a failure's toast never covers the log it is about (issue 51)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    BINDINGS = [
        # the full console's action keys, here: each says it is off rather than doing nothing. No description:
        # neither the bar, the help nor the palette lists them (the help says read-only mode is on); the same ids
        # as the full console's, so a remapped key moves with the action it stands for
        Binding("r", "read_only('restart')", "", show=False, id="restart"),
        Binding("f", "read_only('flag changes')", "", show=False, id="flags"),
        Binding("s", "read_only('start/stop')", "", show=False, id="start_stop"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("e", "toggle_errors", "Errors/all", id="errors"),
        Binding("p", "app.pause", "Pause", id="pause"),
        Binding("g", "app.probe_now", "Probe the endpoint now with a real generation", show=False, id="probe"),
        Binding("w", "toggle_wrap", "Wrap long log lines, or not", show=False, id="wrap"),
        Binding("end", "follow", "Follow the log again after scrolling up", show=False, id="follow"),
        Binding("escape", "close_filter", "Clear the log filter", show=False, id="close_filter"),
        Binding("d", "app.pick", "Deployments", id="pick"),
        Binding("S", "app.sweep", "Sweep", show=False, id="sweep"),
        Binding("i", "app.record", "Write the incident record of the failed (or latest) run", show=False,
                id="record"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "app.quit", "Quit", id="quit"),
    ]

    #: the key bar's order: the actions that change the deployment first, then the viewing keys, help and quit
    #: last (ids; keys not named keep their declared order, after these)
    BAR_ORDER: ClassVar[tuple[str, ...]] = ("restart", "flags", "start_stop", "record", "filter", "errors", "pause",
                                            "pick")
    #: where even one-word labels do not fit (80 columns), these keys leave the bar first, in this order; help,
    #: quit and the palette always stay (help and the palette list every key)
    BAR_DROP: ClassVar[tuple[str, ...]] = ("pick", "pause", "errors", "filter", "start_stop", "flags", "restart")
    #: one-word labels where the first word would mislead ("start" for a key that stops a running server)
    BAR_SHORT: ClassVar[dict[str, str]] = {"start_stop": "start/stop", "record": "record"}
    #: keys the bar shows only while they matter: the incident record's while the run shown has failed (the
    #: failure's toast offers it; at 80 columns the toast is gone in seconds and the bar is what stays)
    BAR_WHEN: ClassVar[dict[str, Callable[[Snapshot], bool]]] = {"record": lambda snap: snap.phase == Phase.FAILED}
    #: read-only mode: the help says so
    READ_ONLY: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        #: the panels, made here and composed once: the screen draws them itself, found or not by a query
        self.lifecycle = LifecyclePanel(id="lifecycle")
        self.errors = ErrorLog(id="errors")
        self.gpus = GpuPanel(id="gpus")
        self.throughput = ThroughputPanel(id="throughput")
        #: the ids of BAR_WHEN's keys that the bar shows now (from the last snapshot drawn)
        self.bar_extra: frozenset[str] = frozenset()

    def compose(self) -> ComposeResult:
        yield ConsoleHeader()
        # two columns, each giving room by priority (app.tcss): the lifecycle panel takes what its phase, failure
        # and hint need and the log the rest; the GPUs what their rows need and the throughput the rest
        with Horizontal(id="panels"):
            with Vertical(id="left"):
                yield self.lifecycle
                yield self.errors
            with Vertical(id="right"):
                yield self.gpus
                yield self.throughput
        yield Static(id="keys")

    def on_mount(self) -> None:
        self.query_one("#lifecycle").border_title = "Lifecycle"
        self.query_one("#gpus").border_title = "GPUs"
        self.query_one("#throughput").border_title = "Throughput"
        self.watch(self, "maximized", self._maximized, init=False)

    @property
    def log_panel(self) -> ErrorLog:
        return self.errors

    # ------------------------------------------------------------------ the panels, drawn from what the app gives

    @_panels_there
    def draw_lifecycle(self, snap: Snapshot, now: float, steps: Sequence[Step], note: str,
                       hide_flags: Sequence[str] = ()) -> None:
        self.lifecycle.show(snap, now, steps, note, hide_flags=hide_flags)
        extra = frozenset(bid for bid, when in self.BAR_WHEN.items() if when(snap))
        if extra != self.bar_extra:
            self.bar_extra = extra
            self.show_keys()

    @_panels_there
    def draw_gpus(self, shown: Shown, gpus: Sequence[int], budget: float | None,
                  holders: Sequence[NamedHolder]) -> None:
        """`gpus`: the deployment's; `budget`: the share of memory its server is told to take (a GPU at it is
        normal, not warned); `holders`: the memory other deployments of the host hold, named."""
        unit = shown.snap.unit
        self.gpus.show(shown.gpu_snap, shown.gpu_history, gpus, unit.main_pid if unit else 0, shown.releasing,
                       shown.snap.attribution, budget, holders)

    @_panels_there
    def draw_throughput(self, shown: Shown, *, plot: bool, now: float, clock: Callable[[], float],
                        live: Callable[[], bool]) -> None:
        """`clock` and `live`: when samples stop the panel redraws itself (its chart's "now" keeps moving), on
        the console's clock, unpaused."""
        self.throughput.clock, self.throughput.live = clock, live
        self.throughput.show(shown.tp, shown.tp_history, shown.throughput_note(), plot=plot, now=now,
                             serving=shown.snap.phase == Phase.READY)

    @_panels_there
    def age_throughput(self) -> None:
        self.throughput.age()

    @_panels_there
    def take_logs(self, lines: Iterable[LogLine], kinds: Iterable[LineKind]) -> None:
        """A batch of the server's lines, kept; drawn by `flush_logs`."""
        self.errors.ingest(lines, kinds)

    @_panels_there
    def flush_logs(self) -> None:
        if self.errors.has_due:
            self.errors.flush()

    @_panels_there
    def check_follow(self) -> None:
        self.errors.check_follow()

    @_panels_there
    def clear_log(self) -> None:
        """Another deployment is shown: nothing of the last one's log."""
        self.errors.entries.clear()
        self.errors.rebuild()

    # ------------------------------------------------------------------ the key bar, help and palette

    def action_read_only(self, what: str) -> None:
        self.notify(REFUSAL.format(what=what), severity="warning", timeout=6, markup=False)

    def _bar(self, keys: list[BarKey], short: bool, width: int) -> Text:
        t = Text(" " if short else "")  # the full labels begin with a space of their own
        for k in keys:
            if short:
                t.append(f"{k.key}", style="bold")
                t.append(f" {self.BAR_SHORT.get(k.id) or k.label.split('/')[0].split()[0].lower()} ")
            else:
                t.append(f" {k.key} ", style="bold")
                t.append(f"{k.label} ")
        t.append(" ^p palette" if not short or t.cell_len + 11 <= width else " ^p", style="dim")
        return t

    def show_keys(self, width: int | None = None) -> None:
        """The key bar: the console's keys as mapped, drawn once and on a resize. (Textual's Footer recomposes
        itself whenever the focus moves, which during a log burst made `/` take a third longer to show and the
        log fall behind.) Where the full labels do not fit (90 columns), each label is one word, so that every key
        still shows rather than the last ones being cut off; where those do not fit either (80 columns), the least
        needed keys leave the bar (BAR_DROP), never help, quit or the palette."""
        width = width or self.size.width or 200
        t = keybar.fit(self._bar_keys(), width, [(keybar.as_is, lambda ks: self._bar(ks, False, width)),
                                                 (keybar.as_is, lambda ks: self._bar(ks, True, width))],
                       self.BAR_DROP)
        self.query_one("#keys", Static).update(t)

    def _bar_keys(self) -> list[BarKey]:
        """Each key the bar shows, in its order (BAR_ORDER)."""
        keys = [BarKey(b.id or "", self.app.get_key_display(b), b.description) for b in self._mapped(shown_only=True)]
        rank = {bid: i for i, bid in enumerate(self.BAR_ORDER)}
        return sorted(keys, key=lambda k: rank.get(k.id, len(rank)))

    def on_resize(self, event: events.Resize) -> None:
        with contextlib.suppress(NoMatches):
            self.show_keys(event.size.width)

    def on_screen_resume(self) -> None:
        """Back from the overview, or from a dialog: the bar as the keys are mapped and the terminal is now."""
        with contextlib.suppress(NoMatches):
            self.show_keys()

    def help_rows(self) -> list[tuple[str, str]]:
        rows = self.key_rows()  # each key once: the bar's keys and those it leaves out (Esc, End)
        if not any(k == "end" for k, _ in rows):  # the focused log's own End binding shadows ours: it does the same
            rows.append(("end", "Follow the log again after scrolling up"))
        return rows

    @classmethod
    def own_bindings(cls) -> list[Binding]:
        """The bindings the console's screen classes declare, the most derived class's first (the full console
        adds its own to the read-only one's), not Textual's."""
        return [b for c in cls.__mro__ if issubclass(c, ConsoleScreen)
                for b in c.__dict__.get("BINDINGS", ()) if isinstance(b, Binding)]

    def _mapped(self, shown_only: bool = False) -> list[Binding]:
        """The console's own bindings that have a description, as currently mapped (Textual's scrolling and copy
        keys are not among them: they work as in any Textual app, and listing them first buried the keys that
        matter); in read-only mode, not those the app's gate refuses (tui/console/gate.py): the bar and help list
        what the keys do here."""
        ours = {b.id for b in self.own_bindings()}
        refusal = getattr(self.app, "refusal", None)
        return [b for b in (ab.binding for ab in self.active_bindings.values())
                if b.description and b.id in ours and (b.show or b.id in self.bar_extra or not shown_only)
                and (refusal is None or refusal(b.action, self) is None)]

    def key_rows(self, shown_only: bool = False) -> list[tuple[str, str]]:
        """The console's own keys, as currently mapped."""
        return [(self.app.get_key_display(b), b.description) for b in self._mapped(shown_only)]

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.help_rows(), self.READ_ONLY))

    # ------------------------------------------------------------------ the log panel's keys

    def action_filter(self) -> None:
        """The filter box is always on screen, one row: opening it changes no layout (a re-layout of the whole
        screen was most of the time a key took to show during a log burst)."""
        inp = self.query_one("#log-filter", Input)
        inp.disabled = False
        inp.placeholder = FILTER_EDITING
        inp.value = self.log_panel.filter_text
        inp.focus()

    def _end_filter_edit(self, inp: Input) -> None:
        inp.disabled = True
        inp.placeholder = FILTER_IDLE
        self.query_one("#log").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "log-filter":
            self.log_panel.set_filter(event.value)
            self._end_filter_edit(event.input)

    @property
    def filtering(self) -> bool:
        """A filter is being typed or is applied: Esc clears it (else Esc goes back to the overview)."""
        return not self.query_one("#log-filter").disabled or bool(self.log_panel.filter_text)

    def action_close_filter(self) -> None:
        """Esc clears the filter: while typing it, or after it was applied; with none, it asks the app to show
        the overview (which it does where there is one)."""
        if not self.filtering:
            self.post_message(self.OverviewAsked())
            return
        inp = self.query_one("#log-filter", Input)
        inp.value = ""
        self.log_panel.set_filter("")
        if not inp.disabled:
            self._end_filter_edit(inp)

    def action_toggle_errors(self) -> None:
        log = self.log_panel
        log.set_mode(not log.show_all)

    def action_toggle_wrap(self) -> None:
        log = self.log_panel
        log.set_wrap(not log.wrap)

    def action_follow(self) -> None:
        self.log_panel.follow()

    def _maximized(self, was: Widget | None, now: Widget | None) -> None:
        """A maximized panel (Textual's maximize, from the command palette) says how to come back: Esc."""
        for widget, on in ((was, False), (now, True)):
            if isinstance(widget, (ErrorLog, GpuPanel)):
                widget.set_maximized(on)  # their subtitles also say other things: the new lines, the legend
            elif widget is not None and widget.has_class("panel"):
                set_border(widget, subtitle=RESTORE_HINT if on else "")

    class OverviewAsked(Message):
        """Esc with no log filter: back to the overview of every deployment, where the app has one."""


class ControlConsoleScreen(ConsoleScreen):
    """The full console's screen: the acting keys run the app's actions, each behind a confirmation."""

    BINDINGS = [
        Binding("r", "app.restart", "Restart", id="restart"),
        Binding("f", "app.flags", "Flags", id="flags"),
        Binding("s", "app.start_stop", "Start/stop", id="start_stop"),
    ]
    READ_ONLY = False
