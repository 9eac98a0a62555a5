"""The read-only console: one deployment's engine shown on the console screen (tui/console/screen.py), and, with
several deployments, the overview of them all (tui/screens/fleet.py); the two are the app's modes.

The app holds the deployment: its engine, what the engine reported, the actions that need it; it subscribes to the
engine and routes what it reports to the screen, which holds the panels and the keys and draws them itself. It does no
parsing and no I/O of its own. The engine runs on the app's event loop, driven through the Protocol of what the
console uses of it (tui/console/port.py; built in tui/console/engines.py), and reports through a listener that posts
its typed updates, all as one message type (`EngineUpdated`), dispatched on the update's type; bursts of a kind
that carries the whole picture coalesce (tui/console/messages.py). That is the one way in: the picture the panels
draw between the other updates comes as one too, every second (`PictureTaken`), and nothing of the engine is read at
the tick. The full console, with the actions that change the deployment, is a subclass (tui/console/control.py) with
its own screen, so in read-only mode those actions do not exist at all rather than being disabled; their keys only
say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console
from textual import work
from textual.app import ScreenStackError, SystemCommand
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tui.config.settings import Settings
from tui.console import scope
from tui.console.engines import open_engine, open_fleet, prepare_demo
from tui.console.messages import EngineUpdated, RestartStepped
from tui.console.navigation import NavigatingApp
from tui.console.overview import CONSOLE_MODE, FLEET_MODE, FLEET_SCREEN
from tui.console.port import ConsoleEngine, ConsoleFleet
from tui.console.record import record_offer, write_incident_record
from tui.console.screen import ConsoleScreen
from tui.console.shown import Panel, Shown
from tui.console.sweeps import SWEEP_LOOK_S, SweepFinder
from tui.engine.updates import (
    CollectorFailed,
    GpusSampled,
    HolderChanged,
    LogsRead,
    PhaseChanged,
    PictureTaken,
    ProbeAnswered,
    ThroughputSampled,
    Update,
)
from tui.exit_codes import ExitCode, signalled
from tui.lifecycle.presets.registry import PRESETS
from tui.managers import ManagerError
from tui.model import LockInfo, Phase, Snapshot
from tui.screens.fleet import FleetScreen
from widgets.gpus import memory_budget
from widgets.lifecycle import release_text

#: the chart is redrawn at most this often (the sparkline above it follows every sample): a plotext frame costs
#: several milliseconds, the largest single share of an idle console's CPU
PLOT_EVERY_S = 5.0


class ConsoleApp(NavigatingApp):
    """The read-only console: watching, filtering and help, no actions that change the deployment."""

    CSS_PATH = Path(__file__).resolve().parent.parent / "app.tcss"
    TITLE = "bringup"
    #: a screen names what it focuses first (the console's screen: the log); one that names nothing, a dialog,
    #: focuses nothing: its keys answer it, and a Yes button focused by default would take an Enter meant otherwise
    AUTO_FOCUS = None
    #: the console is a mode of its own; the overview, with several deployments, another (`start_fleet`)
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {CONSOLE_MODE: ConsoleScreen}
    DEFAULT_MODE = CONSOLE_MODE
    #: the console screen's class: its keys are the console's (the palette lists them, the keymap is checked
    #: against them)
    SCREEN: ClassVar[type[ConsoleScreen]] = ConsoleScreen

    def __init__(self, settings: Settings, deployment: str, *, live: bool = True, demo: bool = False,
                 fleet: Sequence[str] = (), only: Sequence[str] = ()) -> None:
        """`fleet`: the deployments of the overview (the fleet mode), which opens first; `deployment` is then the
        one the console shows when a row is opened. `only`: the deployments this console may show, no other
        (tui/console/scope.py; empty: every configured one)."""
        super().__init__()
        if only:
            settings = scope.only(settings, only)
        #: Textual prints an uncaught exception's traceback here after restoring the terminal; recorded, so that the
        #: exit status's line can name the error (tui/console/run.py) from what was printed
        self.error_console = Console(markup=False, highlight=False, stderr=True, record=True)
        self.fleet: ConsoleFleet | None = open_fleet(settings, fleet) if fleet else None
        self.settings = settings
        self.deployment = deployment
        self.live = live
        self.demo = demo
        self.engine: ConsoleEngine | None = None
        self.sweeps = SweepFinder(settings.state_path())
        #: the deployment shown, as its engine reported it, and the panels that made due (tui/console/shown.py)
        self.shown = Shown.nothing_yet(deployment, "")
        self.paused = False
        self.read_only = self.SCREEN.READ_ONLY
        self.status_note = ""
        self._last_lifecycle = 0.0
        self._sweep_looked = 0.0
        self._was_covered = False
        self._last_plot = 0.0
        self.restarting = False
        self._other_token = ""
        #: the demo server was started by this console (not found running): it stops it on exit
        self.demo_started = False
        #: the console's notion of now; snapshot tests pin it so durations render the same every run
        self.clock = time.time
        #: the phase of each deployment this console watched before, and when it left it: the picker shows them
        self.seen_phases: dict[str, tuple[Phase, float]] = {}
        #: per deployment, how this console's last restart of it ended when that is news the phase does not tell
        #: (superseded by another run, out of time): the overview's row says it until the next action there
        self.action_notes: dict[str, str] = {}

    # ------------------------------------------------------------------ start

    def clear_selection(self) -> None:
        """Textual's, except while a mode's screen is being made. With the eager task factory Textual's App.run
        sets on Python 3.12 and later, a MODES screen composes and mounts its widgets before Textual puts it on its
        mode's stack; an Input among them clears the app's text selection on mount, asks for `app.screen`, and the
        console died at start ("No screens on stack"; run_test, which sets no such factory, never showed it).
        There is no selection to clear then."""
        with contextlib.suppress(ScreenStackError):
            super().clear_selection()

    @property
    def console_screen(self) -> ConsoleScreen:
        """The console mode's screen: the first of its mode's stack, made at start, whichever mode is shown."""
        screen = self.get_screen_stack(CONSOLE_MODE)[0]
        assert isinstance(screen, ConsoleScreen)
        return screen

    def on_mount(self) -> None:
        self.theme = self.settings.ui.theme
        keys = {k: v for k, v in self.settings.ui.keys.items()}
        if keys:
            self.set_keymap(keys)
        self._set_subtitle()
        self.console_screen.show_keys()
        # one timer for everything the console does by the clock (a timer is a wake-up of the process of its own)
        self.set_interval(1 / self.settings.ui.refresh_hz, self._tick, name="refresh")
        # `kill <pid>` (SIGTERM) or SIGINT from outside: leave as `q` does, restoring the terminal and stopping the
        # demo server, instead of dying with the server left running and the terminal in raw mode
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.exit, signalled(sig))
        if self.live:
            self.open_watch(self.deployment)
        self.start_fleet(self.live)  # several deployments: the overview first
        self.look_for_sweep()  # a running sweep of the deployment opens its view; looked for again at the ticks
        self._sweep_looked = self.clock()
        self.render_all()

    def _set_subtitle(self) -> None:
        dep = self.settings.deployments.get(self.deployment)
        snap = self.shown.snap
        host = snap.host or (dep.host if dep else "")
        target = snap.target if self.engine else ""  # what the engine runs, as its picture says
        ro = ("  [read-only]" if self.read_only else "") + ("  esc: all deployments" if self.fleet else "")
        # the server's release once it has said it (the header draws this text as plain text, never markup); the
        # server's name as the picture says it, else as the configuration does (before the first picture)
        preset = PRESETS.get(dep.preset) if dep else None
        server = (snap.server if self.engine else "") or (preset.display_name or preset.name if preset else "")
        release = release_text(snap.release, server)
        after = ("  " if target else "") + release if release else ""
        self.sub_title = f"{self.deployment} @ {host}  {target}{after}{ro}"

    # ------------------------------------------------------------------ engine wiring

    def open_watch(self, name: str) -> None:
        """The one door to showing a deployment: the picker, the overview and its keys all come through here, and
        a deployment this console does not hold (`only`) is refused."""
        if name not in self.settings.deployments:
            self.notify(scope.outside(name, list(self.settings.deployments)), severity="warning", markup=False)
            return
        if self.fleet is not None:
            self.adopt(self.fleet.engines[name])
        else:
            self.start_watch(name)

    def adopt(self, w: ConsoleEngine) -> None:
        """Show one of the fleet's engines, running already: what it has read so far at once (its recent log
        lines, its GPUs, its throughput), then its updates; the engine shown before keeps running, unheard."""
        if w is self.engine:
            return
        if self.engine is not None:
            self.engine.unsubscribe(self._engine_updated)
            self.engine.background = True
            self.engine.pictures = False
        w.background = False
        self._watching(w)
        self.shown = Shown.caught_up(w.snapshot(self.clock()))
        if self.fleet is not None:
            self._logs_read(self.fleet.recent_lines(w.name))
        self._set_subtitle()
        self.render_all()

    def _watching(self, w: ConsoleEngine) -> None:
        """The console's panels start over on `w`, and hear its updates: the picture every second among them."""
        self.engine = w
        self.deployment = w.name
        self.shown = Shown.nothing_yet(w.name, w.host_name)
        self.console_screen.clear_log()
        w.pictures = True
        w.subscribe(self._engine_updated)
        self._set_subtitle()

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def start_watch(self, name: str) -> None:
        if self.engine is not None:
            await self.engine.close()
        w = open_engine(self.settings, name)
        self._watching(w)
        if self.demo:
            self.status_note = "starting the simulated deployment…"
            self.demo_started = True  # until prepare says it found the demo running: a quit meanwhile stops it
            try:
                self.demo_started = await prepare_demo(w, lambda text: self.notify(text, title="bringup demo",
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
        """Listener on the engine: its updates become messages (the engine never touches widgets)."""
        if self.engine is not None:
            self.post_message(EngineUpdated(u))

    def on_engine_updated(self, m: EngineUpdated) -> None:
        match m.update:
            case PictureTaken(snapshot=snap):
                header = (self.shown.snap.target, self.shown.snap.server)
                self.shown.refreshed(snap)
                if (snap.target, snap.server) != header:  # the first picture of an engine names what it runs
                    self._set_subtitle()
            case PhaseChanged(snapshot=snap):
                self._phase_changed(snap)
            case LogsRead() as read:
                self._logs_read(read)
            case GpusSampled(snapshot=snap, history=history):
                self.shown.gpus_sampled(snap, history)
            case ThroughputSampled(sample=sample, history=history):
                self.shown.throughput_sampled(sample, history)
            case CollectorFailed():
                self.shown.due.add(Panel.LIFECYCLE)
            case HolderChanged(holder=holder):
                self._holder_changed(holder)
            case ProbeAnswered():
                pass  # the snapshot says it in words, drawn at the next tick

    def _phase_changed(self, snap: Snapshot) -> None:
        before = self.shown.phase_changed(snap, acting=self.restarting)
        self.offer_record(before, snap)  # a run seen failing: its incident record, a key away
        self._set_subtitle()
        if not self.paused:
            self.render_lifecycle()

    def _logs_read(self, read: LogsRead) -> None:
        """The engine sends lines in batches (at most ten a second, or two thousand lines): each is drawn as it
        comes, which leaves the loop free for keys between batches; while paused they wait for the resume."""
        self.console_screen.take_logs(read.lines, read.kinds)
        self._flush_logs()

    def _holder_changed(self, holder: LockInfo | None) -> None:
        """Phases that move for no reason seen here are named: who, from where, doing what; its steps follow in
        the lifecycle panel's notes as it records them."""
        self.shown.due.add(Panel.LIFECYCLE)
        token = holder.token if holder is not None else ""
        if token == self._other_token:
            return
        self._other_token = token
        if holder is not None:
            self.notify(f"another bringup is at work on {self.deployment}: {replace(holder, step='').describe()}",
                        title=holder.purpose.split()[0] if holder.purpose else "lock", severity="warning",
                        timeout=10)
        else:
            self.notify(f"the other bringup's action on {self.deployment} has ended", timeout=5)

    def on_restart_stepped(self, m: RestartStepped) -> None:
        self.shown.stepped(m.step)
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

    @property
    def covered(self) -> bool:
        """The overview is shown: nothing of the panels can be seen, and drawing them would be work for nothing
        (a dialog over the console leaves them in view: they are drawn under it)."""
        return self.current_mode != CONSOLE_MODE

    def _flush_logs(self) -> None:
        if self.paused or self.covered:  # not behind a dialog: a restart is confirmed over the server's current state
            return
        self.console_screen.flush_logs()

    def _tick(self) -> None:
        """Re-render only what changed: panels get new data at 1-2 Hz, the phase clock needs a second's tick; and
        every SWEEP_LOOK_S, a look for a sweep that started. None while closing: the screens go before the timer."""
        if not self.get_screen_stack(CONSOLE_MODE):  # a late tick on a busy machine died on the empty stack
            return
        now = self.clock()
        if now - self._sweep_looked >= SWEEP_LOOK_S:
            self._sweep_looked = now
            self.look_for_sweep()
        if self.current_mode == FLEET_MODE:  # the overview follows this one timer, paused or not
            self.get_screen(FLEET_SCREEN).post_message(FleetScreen.Ticked())
        if self.paused:
            return
        was, self._was_covered = self._was_covered, self.covered
        if self._was_covered:
            return  # what changed meanwhile stays marked, and is drawn at the first tick uncovered
        if was:
            self._flush_logs()
        self._render_changed()

    def _render_changed(self) -> None:
        due = self.shown.due
        now = self.clock()
        if Panel.LIFECYCLE in due or int(now) != int(self._last_lifecycle):
            self._last_lifecycle = now
            self.render_lifecycle()
            self.console_screen.age_throughput()
        if Panel.GPUS in due:
            self.render_gpus()
        if Panel.THROUGHPUT in due:
            self.render_throughput()
        due.clear()
        self.console_screen.check_follow()

    def render_all(self) -> None:
        self.render_lifecycle()
        self.render_gpus()
        self.render_throughput()
        self.console_screen.check_follow()

    def render_lifecycle(self) -> None:
        dep = self.settings.deployments.get(self.deployment)
        note = self.shown.lifecycle_note(self.status_note, paused=self.paused)
        self.console_screen.draw_lifecycle(self.shown.snap, self.clock(), self.shown.steps, note,
                                           hide_flags=dep.hide_flags if dep else ())

    def render_gpus(self) -> None:
        s = self.shown
        snap = s.snap
        if self.engine is not None:  # the deployment's GPUs, its memory budget and the others' holdings: the picture's
            self.console_screen.draw_gpus(s, snap.deployment_gpus, snap.memory_budget, snap.gpu_holders)
            return
        # no engine (a replay, a test's fixed states): every GPU sampled, the budget as the configuration's server
        # reads the flags shown, no other deployment known
        dep = self.settings.deployments.get(self.deployment)
        gpus = list(range(len(s.gpu_snap.gpus) if s.gpu_snap else 0))
        self.console_screen.draw_gpus(s, gpus, memory_budget(snap.flags, dep.preset if dep else None), ())

    def render_throughput(self, force_plot: bool = False) -> None:
        now = time.monotonic()
        plot = force_plot or now - self._last_plot >= PLOT_EVERY_S
        if plot:
            self._last_plot = now
        self.console_screen.draw_throughput(self.shown, plot=plot, now=self.clock(), clock=self.clock,
                                            live=lambda: not self.paused)

    # ------------------------------------------------------------------ actions: viewing

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.engine is not None:
            self.engine.paused = self.paused
        self.render_lifecycle()
        if not self.paused:
            self._flush_logs()
            self.render_all()

    def action_probe_now(self) -> None:
        """Once ready and serving, the console probes every 30 s only: this asks for a generation now."""
        if self.engine is not None:
            self.engine.probe_now()
            self.notify("probing the endpoint with a real generation", timeout=2)

    # ------------------------------------------------------------------ the incident record (tui/console/record.py)

    def offer_record(self, before: Snapshot, snap: Snapshot) -> None:
        key = self._key_for("record", "i") if self.refusal("app.record") is None else ""
        notice = record_offer(before, snap, live=self.live, key=key)
        if notice is not None:
            self.notify(notice.text, timeout=12, markup=False)

    def _key_for(self, binding_id: str, default: str) -> str:
        """The key the binding is on now (a keymap may have moved it)."""
        for key, active in self.active_bindings.items():
            if active.binding.id == binding_id:
                return key
        return default

    async def action_record(self) -> None:
        if self.engine is not None:  # the run's newest record is written off the loop: wait for it (bounded)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.engine.history.flush(), 5)
        dep = self.engine.dep if self.engine is not None else None
        notice = await asyncio.to_thread(write_incident_record, self.settings.state_path(), self.deployment,
                                         self.shown.snap, dep)
        self.notify(notice.text, severity=notice.severity, timeout=12 if notice.severity == "information" else 8,
                    markup=False)

    # ------------------------------------------------------------------ the palette

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette offers every key of the console (the full console's screen adds its own to the read-only
        one's: both lists, not just the subclass's), each with the key that does it."""
        yield from super().get_system_commands(screen)
        seen: set[str] = set()
        for b in self.SCREEN.own_bindings():
            if b.description and b.id != "quit" and b.action not in seen and self.refusal(b.action) is None:
                seen.add(b.action)
                yield SystemCommand(b.description, f"the {self.get_key_display(b)} key",
                                    partial(self.run_action, b.action, self.console_screen))

    async def action_quit(self) -> None:
        if self.engine is not None:
            await self.engine.close()
            self.engine = None
        if self.fleet is not None:
            await self.fleet.close()
        self.exit(ExitCode.OK)

