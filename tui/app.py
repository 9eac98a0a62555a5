"""The Textual console: four panels (lifecycle, GPUs, log, throughput) over one deployment's engine.

The app composes widgets, binds keys to actions and routes typed messages; it does no parsing and no I/O of its
own. The engine (`tui.engine.Watch`) runs on the app's event loop and reports through a listener that posts
messages; dangerous actions run the same restart protocol as the CLI in a worker. Read-only mode is a different
class without the control bindings, so those keys do not exist at all rather than being disabled.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Grid
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Header, Input, Static
from textual.worker import Worker, WorkerState

from tui.config import DEMO, Settings
from tui.engine import Update, Watch
from tui.lifecycle.flags import FlagChange, apply_changes, diff
from tui.managers import ManagerError
from tui.messages import (
    CollectorFailed,
    GpusSampled,
    LogsArrived,
    OtherClientActed,
    PhaseChanged,
    RestartFinished,
    RestartStepped,
    ThroughputSampled,
)
from tui.model import GpuSnapshot, Phase, Snapshot, ThroughputSample
from tui.ops import restart as protocol
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen
from tui.screens.help import HelpScreen
from tui.screens.picker import PickerScreen
from tui.transport import TransportError
from tui.transport.local import kill_all_children
from widgets.error_log import FILTER_EDITING, FILTER_IDLE, ErrorLog
from widgets.gpus import GpuPanel
from widgets.lifecycle import LifecyclePanel
from widgets.throughput import ThroughputPanel

#: the chart is redrawn at most this often (the sparkline above it follows every sample): a plotext frame costs
#: several milliseconds, the largest single share of an idle console's CPU
PLOT_EVERY_S = 5.0
#: new log lines are drawn at most this often
LOG_EVERY_S = 0.1


def empty_snapshot(name: str, host: str) -> Snapshot:
    """Before anything was read: not STOPPED (the server may well be READY), but not known yet."""
    return Snapshot(deployment=name, host=host, phase=Phase.UNKNOWN, invocation="", timeline=(), failure=None,
                    stalled_for=None, unit=None, gpus=None, throughput=None,
                    stale=f"connecting to {host}" if host else "connecting")


class ConsoleApp(App[int]):
    """The read-only console: watching, filtering and help, no actions that change the deployment."""

    CSS_PATH = "app.tcss"
    TITLE = "bringup"
    AUTO_FOCUS = "#log"
    BINDINGS = [
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("e", "toggle_errors", "Errors/all", id="errors"),
        Binding("p", "pause", "Pause", id="pause"),
        Binding("w", "toggle_wrap", "Wrap long log lines, or not", show=False, id="wrap"),
        Binding("end", "follow", "Follow the log again after scrolling up", show=False, id="follow"),
        Binding("escape", "close_filter", "Clear the log filter", show=False, id="close_filter"),
        Binding("d", "pick", "Deployments", id="pick"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, settings: Settings, deployment: str, *, live: bool = True, demo: bool = False) -> None:
        super().__init__()
        self.settings = settings
        self.deployment = deployment
        self.live = live
        self.demo = demo
        self.watch_: Watch | None = None
        self.snap = empty_snapshot(deployment, "")
        self.gpu_snap: GpuSnapshot | None = None
        self.gpu_history: dict[int, Sequence[float]] = {}
        self.tp: ThroughputSample | None = None
        self.tp_history: list[tuple[float, float]] = []
        self.steps: list[protocol.Step] = []
        self.releasing = False
        self.paused = False
        self.read_only = True
        self.status_note = ""
        self._last_log_flush = 0.0
        self._log_flush_due = False
        self._dirty: set[str] = set()
        self._last_lifecycle = 0.0
        self._last_plot = 0.0
        self.restarting = False
        self._other_token = ""
        #: the demo server was started by this console (not found running): it stops it on exit
        self.demo_started = False
        #: the console's notion of now; snapshot tests pin it so durations render the same every run
        self.clock = time.time

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        with Grid(id="panels"):
            yield LifecyclePanel(id="lifecycle")
            yield GpuPanel(id="gpus")
            yield ErrorLog(id="errors")
            yield ThroughputPanel(id="throughput")
        yield Static(id="keys")

    def on_mount(self) -> None:
        self.theme = self.settings.ui.theme
        keys = {k: v for k, v in self.settings.ui.keys.items()}
        if keys:
            self.set_keymap(keys)
        self.query_one("#lifecycle").border_title = "Lifecycle"
        self.query_one("#gpus").border_title = "GPUs"
        self.query_one("#throughput").border_title = "Throughput"
        self._set_subtitle()
        self._show_keys()
        self.set_interval(1 / self.settings.ui.refresh_hz, self._tick, name="refresh")
        # `kill <pid>` (SIGTERM) or SIGINT from outside: leave as `q` does, restoring the terminal and stopping the
        # demo server, instead of dying with the server left running and the terminal in raw mode
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.exit, 128 + sig)
        if self.live:
            self.open_watch(self.deployment)
        self.render_all()

    def _set_subtitle(self) -> None:
        dep = self.settings.deployments.get(self.deployment)
        host = self.snap.host or (dep.host if dep else "")
        target = self.watch_.manager.target if self.watch_ else ""
        ro = "  [read-only]" if self.read_only else ""
        self.sub_title = f"{self.deployment} @ {host}  {target}{ro}"

    # ------------------------------------------------------------------ engine wiring

    def open_watch(self, name: str) -> None:
        self.start_watch(name)

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def start_watch(self, name: str) -> None:
        if self.watch_ is not None:
            await self.watch_.close()
        dep = self.settings.deployments[name]
        w = Watch(self.settings, name, dep)
        self.watch_ = w
        self.deployment = name
        self.snap = empty_snapshot(name, w.host_name)
        self.gpu_snap, self.tp, self.steps = None, None, []
        self.gpu_history, self.tp_history = {}, []
        errors = self.query_one(ErrorLog)
        errors.entries.clear()
        errors.rebuild()
        w.subscribe(self._engine_updated)
        self._set_subtitle()
        if self.demo:
            from tui.demo import prepare

            self.status_note = "starting the simulated deployment…"
            self.demo_started = True  # until prepare says it found the demo running: a quit meanwhile stops it
            try:
                self.demo_started = await prepare(w, lambda text: self.notify(text, title="bringup demo",
                                                                             timeout=10, markup=False))
            except ManagerError as e:
                self.demo_started = False
                self.status_note = f"the demo cannot start: {e}"
                self.notify(str(e), title="bringup demo", severity="error", timeout=30, markup=False)
                self.render_lifecycle()
                return
            self.status_note = ""
        await w.start()

    def _engine_updated(self, u: Update) -> None:
        """Listener on the engine: turn its updates into messages (the engine never touches widgets)."""
        w = self.watch_
        if w is None:
            return
        if u.kind == "phase":
            self.post_message(PhaseChanged(w.snapshot(self.clock())))
        elif u.kind == "logs":
            self.post_message(LogsArrived(list(u.payload)))
        elif u.kind == "gpus":
            hist = {i: list(h.mem)[-40:] for i, h in w.gpu_history.items()}
            self.post_message(GpusSampled(u.payload, hist))
        elif u.kind == "throughput":
            self.post_message(ThroughputSampled(u.payload, list(w.tps_history)[-300:]))
        elif u.kind == "collector":
            name, err = u.payload
            self.post_message(CollectorFailed(name, err))
        elif u.kind == "holder":
            self.post_message(OtherClientActed(u.payload))

    def on_phase_changed(self, m: PhaseChanged) -> None:
        if m.snapshot.invocation != self.snap.invocation and not self.restarting:
            self.steps = []  # a run this console did not start: the steps of its own last action are history
        if m.snapshot.phase != self.snap.phase:
            self._dirty.add("throughput")  # its figures are labelled by whether the server serves: no sample says so
        self.snap = m.snapshot
        self._dirty.add("lifecycle")
        self._set_subtitle()
        if not self.paused:
            self.render_lifecycle()

    def on_logs_arrived(self, m: LogsArrived) -> None:
        """Lines are drawn at most every LOG_EVERY_S (a burst repaints the log 10 times a second, not at every
        batch, which leaves the loop free for keys); while paused they wait, and the next tick shows them."""
        with contextlib.suppress(NoMatches):  # the app is closing its panels
            self.query_one(ErrorLog).ingest(m.lines)
        wait = self._last_log_flush + LOG_EVERY_S - time.monotonic()
        if wait <= 0:
            self._flush_logs()
        elif not self._log_flush_due:
            self._log_flush_due = True
            self.set_timer(wait, self._flush_logs)

    def on_gpus_sampled(self, m: GpusSampled) -> None:
        self.gpu_snap = m.snapshot
        self.gpu_history = dict(m.history)
        self._dirty.add("gpus")

    def on_throughput_sampled(self, m: ThroughputSampled) -> None:
        self.tp = m.sample
        self.tp_history = list(m.history)
        self._dirty.add("throughput")

    def on_collector_failed(self, m: CollectorFailed) -> None:
        self._dirty.add("lifecycle")

    def on_other_client_acted(self, m: OtherClientActed) -> None:
        """Phases that move for no reason seen here are named: who, from where, doing what; its steps follow in
        the lifecycle panel's notes as it records them."""
        self._dirty.add("lifecycle")
        token = m.holder.token if m.holder is not None else ""
        if token == self._other_token:
            return
        self._other_token = token
        if m.holder is not None:
            self.notify(f"another bringup is at work on {self.deployment}: {replace(m.holder, step='').describe()}",
                        title=m.holder.purpose.split()[0] if m.holder.purpose else "lock", severity="warning",
                        timeout=10)
        else:
            self.notify(f"the other bringup's action on {self.deployment} has ended", timeout=5)

    def on_restart_stepped(self, m: RestartStepped) -> None:
        self.steps.append(m.step)
        self.releasing = m.step.name == "release" and m.step.status == "running"
        self.render_lifecycle()
        self.render_gpus()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """One handler for every worker's error: the workers catch what they expect and say so; anything else (a
        bug) is shown here too, never fatal and never silent."""
        if event.state != WorkerState.ERROR:
            return
        err = event.worker.error
        self.notify(f"{type(err).__name__}: {err}\nan unexpected error (a bug in bringup: please report it); the "
                    "console keeps running", title=f"{self.deployment}: {event.worker.name} failed",
                    severity="error", timeout=30, markup=False)

    # ------------------------------------------------------------------ rendering

    def _flush_logs(self) -> None:
        self._log_flush_due = False
        if self.paused:  # not behind a dialog: a restart is confirmed over the server's current state
            return
        with contextlib.suppress(NoMatches):
            errors = self.query_one(ErrorLog)
            if errors.has_due:
                self._last_log_flush = time.monotonic()
                errors.flush()

    def _tick(self) -> None:
        """Re-render only what changed: panels get new data at 1-2 Hz, the phase clock needs a second's tick."""
        if self.paused:
            return
        with contextlib.suppress(NoMatches):  # the app is closing its panels
            self._render_changed()

    def _render_changed(self) -> None:
        self._flush_logs()
        if self.watch_ is not None:
            self.snap = self.watch_.snapshot(self.clock())
        now = self.clock()
        if "lifecycle" in self._dirty or int(now) != int(self._last_lifecycle):
            self._last_lifecycle = now
            self.render_lifecycle()
        if "gpus" in self._dirty:
            self.render_gpus()
        if "throughput" in self._dirty:
            self.render_throughput()
        self._dirty.clear()
        self.query_one(ErrorLog).check_follow()

    def render_all(self) -> None:
        self.render_lifecycle()
        self.render_gpus()
        self.render_throughput()
        self.query_one(ErrorLog).check_follow()

    def render_lifecycle(self) -> None:
        note = self.status_note
        if self.paused:
            note = (note + "  " if note else "") + "PAUSED (p to resume)"
        for n in self.snap.notes:
            if n.startswith(("unit", "logs", "probe", "ssh", "another bringup")):
                note = (note + "\n" if note else "") + n
        dep = self.settings.deployments.get(self.deployment)
        with contextlib.suppress(NoMatches):  # a message that arrives while the app is closing its panels
            self.query_one(LifecyclePanel).show(self.snap, self.clock(), self.steps, note,
                                                hide_flags=dep.hide_flags if dep else ())

    def render_gpus(self) -> None:
        unit = self.snap.unit
        gpus = self.watch_.deployment_gpus() if self.watch_ else list(range(len(self.gpu_snap.gpus)
                                                                             if self.gpu_snap else 0))
        with contextlib.suppress(NoMatches):
            self.query_one(GpuPanel).show(self.gpu_snap, self.gpu_history, gpus, unit.main_pid if unit else 0,
                                          self.releasing, self.snap.attribution)

    def render_throughput(self, force_plot: bool = False) -> None:
        note = ""
        for n in self.snap.notes:
            if n.startswith("no metrics"):
                note = n
        if self.tp is None and self.snap.phase == Phase.READY and not note:
            note = "no metrics yet (no /metrics and no throughput log lines)"
        now = time.monotonic()
        plot = force_plot or now - self._last_plot >= PLOT_EVERY_S
        if plot:
            self._last_plot = now
        with contextlib.suppress(NoMatches):
            self.query_one(ThroughputPanel).show(self.tp, self.tp_history, note, plot=plot, now=self.clock(),
                                                 serving=self.snap.phase == Phase.READY)

    # ------------------------------------------------------------------ actions: viewing

    def action_filter(self) -> None:
        """The filter box is always on screen, one row: opening it changes no layout (a re-layout of the whole
        screen was most of the time a key took to show during a log burst)."""
        inp = self.query_one("#log-filter", Input)
        inp.disabled = False
        inp.placeholder = FILTER_EDITING
        inp.value = self.query_one(ErrorLog).filter_text
        inp.focus()

    def _end_filter_edit(self, inp: Input) -> None:
        inp.disabled = True
        inp.placeholder = FILTER_IDLE
        self.query_one("#log").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "log-filter":
            self.query_one(ErrorLog).set_filter(event.value)
            self._end_filter_edit(event.input)

    def action_close_filter(self) -> None:
        """Esc clears the filter: while typing it, or after it was applied."""
        inp = self.query_one("#log-filter", Input)
        inp.value = ""
        self.query_one(ErrorLog).set_filter("")
        if not inp.disabled:
            self._end_filter_edit(inp)

    def action_toggle_errors(self) -> None:
        log = self.query_one(ErrorLog)
        log.set_mode(not log.show_all)

    def action_toggle_wrap(self) -> None:
        log = self.query_one(ErrorLog)
        log.set_wrap(not log.wrap)

    def action_follow(self) -> None:
        self.query_one(ErrorLog).follow()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.watch_ is not None:
            self.watch_.paused = self.paused
        self.render_lifecycle()
        if not self.paused:
            self._flush_logs()
            self.render_all()

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
        return [b for c in cls.__mro__ if issubclass(c, ConsoleApp)
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

    def action_pick(self) -> None:
        from tui.managers.process import describe_command

        names = [(n, f"{d.manager} {d.unit or describe_command(d.command)} @ {d.host_label}")
                 for n, d in self.settings.deployments.items()]
        if len(names) <= 1:
            self.notify("only one deployment is configured")
            return

        def chosen(name: str | None) -> None:
            if name and name != self.deployment:
                self.open_watch(name)

        self.push_screen(PickerScreen(names, self.deployment), chosen)

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

    async def action_quit(self) -> None:
        if self.watch_ is not None:
            await self.watch_.close()
            self.watch_ = None
        self.exit(0)


class ControlConsoleApp(ConsoleApp):
    """The full console: adds restart, flags and start/stop, each behind a confirmation."""

    BINDINGS = [
        Binding("r", "restart", "Restart", id="restart"),
        Binding("f", "flags", "Flags", id="flags"),
        Binding("s", "start_stop", "Start/stop", id="start_stop"),
    ]

    def __init__(self, settings: Settings, deployment: str, *, live: bool = True, demo: bool = False) -> None:
        super().__init__(settings, deployment, live=live, demo=demo)
        self.read_only = False

    def _target_lines(self) -> list[str]:
        w = self.watch_
        dep = self.settings.deployments[self.deployment]
        return [f"deployment: {self.deployment}", f"host:       {w.host_name if w else dep.host}",
                f"target:     {w.manager.target if w else dep.unit or dep.manager}"]

    def _cannot(self, title: str, e: BaseException, done: str, retry: str) -> None:
        """An action could not read or reach the deployment. Shown as an error in the console, never fatal (an
        operator whose host is down needs the console most): the cause, what was `done` about it (nothing, as a
        rule), and what to do: fix the cause, then `retry` (the key that tries again)."""
        w = self.watch_
        if isinstance(e, TransportError):
            where = w.transport.name if w is not None else "local"
            when = f"once `ssh {where}` works from here" if where != "local" else "once that is fixed"
            todo = f"{done}; {retry} {when}"
        elif isinstance(e, ManagerError):
            todo = f"{done}; check deployment {self.deployment!r} in the config (its unit or command) or the host, " \
                   f"then {retry}"
        else:
            todo = f"{done}: an unexpected error (a bug in bringup: please report it); {retry}"
        cause = str(e) if isinstance(e, (TransportError, ManagerError)) else f"{type(e).__name__}: {e}"
        self.notify(f"{cause}\n{todo}", title=f"{self.deployment}: {title}", severity="error", timeout=20,
                    markup=False)

    async def _flags_unchanged(self, w: Watch, shown: Sequence[str], key: str) -> bool:
        """Whether the flags are still those a dialog was computed from. A yes to a dialog over flags someone
        else has changed since would undo their change (a rollback computed before another operator's restart
        reverted it): the console re-reads them first and, if they moved, does nothing and says so."""
        try:
            now = await w.argv()
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot re-read the flags", e, "nothing was done", f"press {key} to try again")
            return False
        if list(now) == list(shown):
            return True
        change = diff(list(shown), now, w.flag_specs) or ["the command line changed"]
        self.notify("the flags changed after the dialog opened, so nothing was done (it would have undone "
                    f"that change): {'; '.join(change)}\npress {key} to decide again over the flags as they are "
                    "now", title=f"{self.deployment}: not restarted: flags changed meanwhile", severity="warning",
                    timeout=20, markup=False)
        return False

    @work(exclusive=True, group="dialog", exit_on_error=False)
    async def confirm_restart(self, changes: list[FlagChange], key: str = "r") -> None:
        """Read the flags (over SSH: off the message loop, so the console keeps answering meanwhile) and ask."""
        w = self.watch_
        if w is None:
            self.notify("not connected yet", severity="warning")
            return
        if self._busy():
            return
        try:
            old = await w.argv()
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot read its flags", e, "nothing was changed", f"press {key} to try again")
            return
        try:
            new = apply_changes(old, changes, w.flag_specs)
        except ValueError as e:
            self.notify(str(e), severity="error", markup=False)
            return
        change_lines = diff(old, new, w.flag_specs) or ["no flag change"]
        lines = [*self._target_lines(), "", "flags:", *("  " + c for c in change_lines), "",
                 "stop, wait for GPU memory release, start, verify a real generation"]

        def answered(yes: bool | None) -> None:
            if yes:  # a No drops the change: a later `r` restarts with the flags as they are
                self.run_protocol(new, True, shown=old, key=key)

        self.push_screen(ConfirmScreen(f"Restart {self.deployment}?", lines), answered)

    def action_restart(self) -> None:
        self.confirm_restart([])

    def action_flags(self) -> None:
        if self.watch_ is None:
            self.notify("not connected yet", severity="warning")
            return
        self.open_flags()

    @work(exclusive=True, group="dialog", exit_on_error=False)
    async def open_flags(self) -> None:
        w = self.watch_
        if w is None:
            return
        try:
            values = await w.flag_values()
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot read its flags", e, "nothing was changed", "press f to try again")
            return
        dep = self.settings.deployments[self.deployment]

        def applied(changes: list[FlagChange] | None) -> None:
            if changes:
                self.confirm_restart(changes, "f")

        self.push_screen(FlagsScreen(w.flag_specs, values, dep.flags), applied)

    def action_start_stop(self) -> None:
        w = self.watch_
        if w is None or self._busy():
            return
        unit = w.state.unit
        if unit is None:  # neither Start nor Stop is known to be the right offer
            why = w.collector_errors.get("unit", "")
            self.notify(f"cannot tell whether it is running: {why or 'its state has not been read yet'}\n"
                        "press s again once the console shows its state", title=f"{self.deployment}: no start/stop",
                        severity="error" if why else "warning", markup=False)
            return
        running = unit.running
        verb = "Stop" if running else "Start"

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            if running:
                self.run_stop()
            else:
                self.run_protocol(None, False, key="s")

        self.push_screen(ConfirmScreen(f"{verb} {self.deployment}?", self._target_lines()), answered)

    def _busy(self) -> bool:
        """An action of this console is under way: a second one waits its turn (never cancels it midway)."""
        if self.restarting:
            self.notify("a restart is already running", title=self.deployment, severity="warning")
        return self.restarting

    @work(group="ops", exit_on_error=False)
    async def run_stop(self) -> None:
        w = self.watch_
        if w is None or self._busy():
            return
        self.restarting = True
        self.steps = []
        self.render_lifecycle()
        try:
            # under the deployment's lock, like a restart, and done when the GPU memory is released
            def stepped(s: protocol.Step) -> None:
                self.post_message(RestartStepped(s))

            outcome = await protocol.stop(w, stepped)
        except Exception as e:  # shown, never fatal to the console
            outcome = protocol.Outcome(False, w.state.phase, f"{type(e).__name__}: {e}")
        finally:
            self.restarting = False
        self.post_message(RestartFinished(outcome, "stop", "s"))

    @work(group="ops", exit_on_error=False)
    async def run_protocol(self, new_argv: list[str] | None, restart: bool, *, shown: Sequence[str] | None = None,
                           key: str = "r") -> None:
        """The restart protocol (or a start). `shown`: the flags the confirmation was computed from; if they
        changed since, nothing is done."""
        w = self.watch_
        if w is None or self._busy():
            return
        self.restarting = True
        try:
            if shown is not None and not await self._flags_unchanged(w, shown, key):
                return
            self.steps = []

            def stepped(s: protocol.Step) -> None:
                self.post_message(RestartStepped(s))

            outcome = await protocol.run(w, new_argv, stepped,
                                         stop_first=restart, purpose="restart" if restart else "start",
                                         rollback=False, expect_argv=shown)
        except Exception as e:  # shown, never fatal to the console
            outcome = protocol.Outcome(False, w.state.phase, f"{type(e).__name__}: {e}")
        finally:
            self.restarting = False
            self.releasing = False
        self.post_message(RestartFinished(outcome, "restart" if restart else "start", key))

    def on_restart_finished(self, m: RestartFinished) -> None:
        """Say how it ended. A rollback is offered only when this console's own restart ran and the server failed:
        not when it was refused (another bringup holds the lock: the flags are that one's, not ours to undo), not
        when it ran out of time, not when it never started."""
        o, what, key = m.outcome, m.action, m.key
        title = f"{self.deployment}: {what}"
        if o.ok:
            self.notify(o.message, title=title, markup=False)
            return
        lock_refused = o.refused and any(s.name == "lock" and s.status == "failed" for s in o.steps)
        if lock_refused:
            self.notify(f"refused: {o.message}\nnothing was changed: the lifecycle panel follows its run; press "
                        f"{key} again after it, if still needed", title=f"{title} refused", severity="warning",
                        timeout=20, markup=False)
            return
        ours = (what != "stop" and not o.refused and not o.timed_out and not o.superseded and not o.rolled_back
                and any(s.name == "lock" and s.status == "done" for s in o.steps))
        if o.failure is not None:
            todo = "the lifecycle panel has the hint, e the errors"
        elif o.timed_out or o.superseded:
            todo = "the lifecycle panel follows what runs now"
        else:
            todo = f"press {key} to try again once that is fixed"
        self.notify(f"{o.message}\n{todo}", title=f"{title} failed", severity="error", timeout=20, markup=False)
        if ours:
            self.offer_rollback()

    @work(exclusive=True, group="rollback", exit_on_error=False)
    async def offer_rollback(self) -> None:
        w = self.watch_
        if w is None:
            return
        try:
            good = await w.manager.read_saved_argv("ready")
            current = await w.argv()
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot read its flags", e, "no rollback offered",
                         "press f to see the flags and set them back")
            return
        if good is None or list(good) == list(current):
            return
        change = diff(current, good, w.flag_specs) or ["the last flags that reached ready"]

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_protocol(list(good), True, shown=current)

        self.push_screen(ConfirmScreen(f"Roll back {self.deployment}?", [
            *self._target_lines(), "", "back to the last flags that reached ready:", *("  " + c for c in change)]),
            answered)


def _stop_demo(settings: Settings, name: str) -> None:
    from tui.demo import stop_demo

    async def _stop() -> None:
        w = Watch(settings, name, settings.deployments[name])
        try:
            await stop_demo(w)
        finally:
            await w.close()

    asyncio.run(_stop())


def _on_hangup(settings: Settings, name: str, stop_demo: bool) -> None:
    """The terminal is gone: Textual cannot restore it (its shutdown can block writing to a dead tty), so end
    here: kill the commands we started, stop the demo server, exit. Runs in a thread of its own."""
    try:
        kill_all_children()
        if stop_demo:
            _stop_demo(settings, name)
        kill_all_children()
    finally:
        os._exit(129)


def run_app(settings: Settings, deployment: str | None, *, read_only: bool = False, demo_keep: bool = False) -> int:
    name, _ = settings.deployment(deployment)
    cls = ConsoleApp if read_only else ControlConsoleApp
    app = cls(settings, name, demo=name == DEMO)
    stop_demo = name == DEMO and not demo_keep

    def hangup(signum: int, frame: object) -> None:
        threading.Thread(target=_on_hangup, args=(settings, name, stop_demo and app.demo_started),
                         daemon=True).start()

    signal.signal(signal.SIGHUP, hangup)
    # everything imported and built so far lives as long as the process: out of the collector's full passes, which
    # otherwise walk it again and again while log lines stream in
    gc.freeze()
    code = app.run()
    if stop_demo and app.demo_started:
        _stop_demo(settings, name)
    return exit_status(app, code)


def exit_status(app: App[int], result: int | None) -> int:
    """The console's exit status: its own (q: 0; SIGTERM or SIGINT: 128 + N), or, when it died of an uncaught
    exception, Textual's non-zero return code (1) and one line on stderr under the traceback Textual printed
    after restoring the terminal. `app.run()` returns None then, which must never read as a clean exit to a
    script or a unit that runs the console."""
    if app.return_code:
        err = getattr(app, "_exception", None)  # Textual keeps the first uncaught exception here
        why = f"{type(err).__name__}: {err}" if err is not None else "an uncaught error"
        print(f"bringup: the console stopped on an unexpected error: {why} (a bug in bringup: please report it "
              "with the traceback above)", file=sys.stderr)
        return app.return_code
    return result or 0
