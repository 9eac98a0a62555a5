"""The read-only console: four panels (lifecycle, GPUs, log, throughput) over one deployment's engine.

The app composes widgets, binds keys to actions and routes typed messages; it does no parsing and no I/O of its
own. The engine (`tui.engine.Engine`) runs on the app's event loop and reports through a listener that posts its
typed updates, all as one message type (`EngineUpdated`), dispatched on the update's type. The full console, with
the actions that change the deployment, is a subclass (tui/console/control.py), so in read-only mode those actions
do not exist at all rather than being disabled; their keys only say so (tui/console/keys.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import Header, Static
from textual.worker import Worker, WorkerState

from tui.config import Settings
from tui.console.fleet_keys import FleetKeys
from tui.console.log_keys import LogKeys
from tui.console.sweep_keys import SweepKeys
from tui.engine import Engine
from tui.engine.fleet import Fleet
from tui.engine.updates import (
    CollectorFailed,
    GpusSampled,
    HolderChanged,
    LogsRead,
    PhaseChanged,
    ProbeAnswered,
    ThroughputSampled,
    Update,
)
from tui.exit_codes import ExitCode, signalled
from tui.lifecycle.presets.registry import PRESETS
from tui.managers import ManagerError
from tui.messages import EngineUpdated, RestartStepped
from tui.model import GpuSnapshot, LockInfo, NoteSource, Phase, Snapshot, Step, ThroughputSample
from widgets.error_log import RESTORE_HINT, ErrorLog
from widgets.gpus import GpuPanel, memory_budget
from widgets.lifecycle import LifecyclePanel, release_text
from widgets.throughput import ThroughputPanel

#: the chart is redrawn at most this often (the sparkline above it follows every sample): a plotext frame costs
#: several milliseconds, the largest single share of an idle console's CPU
PLOT_EVERY_S = 5.0
#: GPU memory samples the sparkline shows, and tokens/s samples the chart does
SPARK_SAMPLES = 60  # as many as the widest sparkline (widgets.gpus.SPARK_MAX)
CHART_SAMPLES = 300


def empty_snapshot(name: str, host: str) -> Snapshot:
    """Before anything was read: not STOPPED (the server may well be READY), but not known yet."""
    return Snapshot(deployment=name, host=host, phase=Phase.UNKNOWN, invocation="", timeline=(), failure=None,
                    stalled_for=None, unit=None, gpus=None, throughput=None,
                    stale=f"connecting to {host}" if host else "connecting")


class ConsoleApp(FleetKeys, SweepKeys, LogKeys):
    """The read-only console: watching, filtering and help, no actions that change the deployment."""

    CSS_PATH = Path(__file__).resolve().parent.parent / "app.tcss"
    TITLE = "bringup"
    AUTO_FOCUS = "#log"
    BINDINGS = [
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("e", "toggle_errors", "Errors/all", id="errors"),
        Binding("p", "pause", "Pause", id="pause"),
        Binding("g", "probe_now", "Probe the endpoint now with a real generation", show=False, id="probe"),
        Binding("w", "toggle_wrap", "Wrap long log lines, or not", show=False, id="wrap"),
        Binding("end", "follow", "Follow the log again after scrolling up", show=False, id="follow"),
        Binding("escape", "close_filter", "Clear the log filter", show=False, id="close_filter"),
        Binding("d", "pick", "Deployments", id="pick"),
        Binding("S", "sweep", "Sweep", show=False, id="sweep"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, settings: Settings, deployment: str, *, live: bool = True, demo: bool = False,
                 fleet: Sequence[str] = ()) -> None:
        """`fleet`: the deployments of the overview (tui/console/fleet_keys.py), which opens first; `deployment`
        is then the one the console shows under it."""
        super().__init__()
        self.fleet: Fleet | None = Fleet(settings, fleet) if fleet else None
        self.settings = settings
        self.deployment = deployment
        self.live = live
        self.demo = demo
        self.watch_: Engine | None = None
        self.snap = empty_snapshot(deployment, "")
        self.gpu_snap: GpuSnapshot | None = None
        self.gpu_history: dict[int, Sequence[float]] = {}
        self.tp: ThroughputSample | None = None
        self.tp_history: list[tuple[float, float]] = []
        self.steps: list[Step] = []
        self.releasing = False
        self.paused = False
        self.read_only = True
        self.status_note = ""
        self._dirty: set[str] = set()
        self._last_lifecycle = 0.0
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

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        # two columns, each giving room by priority (app.tcss): the lifecycle panel takes what its phase, failure
        # and hint need and the log the rest; the GPUs what their rows need and the throughput the rest
        with Horizontal(id="panels"):
            with Vertical(id="left"):
                yield LifecyclePanel(id="lifecycle")
                yield ErrorLog(id="errors")
            with Vertical(id="right"):
                yield GpuPanel(id="gpus")
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
        self.watch(self.screen, "maximized", self._maximized, init=False)
        self.set_interval(1 / self.settings.ui.refresh_hz, self._tick, name="refresh")
        # `kill <pid>` (SIGTERM) or SIGINT from outside: leave as `q` does, restoring the terminal and stopping the
        # demo server, instead of dying with the server left running and the terminal in raw mode
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.exit, signalled(sig))
        if self.live:
            self.open_watch(self.deployment)
        self.start_fleet(self.live)  # several deployments: the overview first (tui/console/fleet_keys.py)
        self.start_sweep_discovery()  # a running sweep of the deployment opens its view (tui/console/sweep_keys.py)
        self.render_all()

    def _set_subtitle(self) -> None:
        dep = self.settings.deployments.get(self.deployment)
        host = self.snap.host or (dep.host if dep else "")
        target = self.watch_.manager.target if self.watch_ else ""
        ro = ("  [read-only]" if self.read_only else "") + ("  esc: all deployments" if self.fleet else "")
        # the server's release once it has said it (the header draws this text as plain text, never markup)
        preset = self.watch_.preset if self.watch_ else PRESETS.get(dep.preset) if dep else None
        release = release_text(self.snap.release, preset.display_name or preset.name if preset else "")
        after = ("  " if target else "") + release if release else ""
        self.sub_title = f"{self.deployment} @ {host}  {target}{after}{ro}"

    # ------------------------------------------------------------------ engine wiring

    def open_watch(self, name: str) -> None:
        if self.fleet is not None:
            self.adopt(self.fleet.engines[name])
        else:
            self.start_watch(name)

    def adopt(self, w: Engine) -> None:
        """Show one of the fleet's engines, running already: what it has read so far at once (its recent log
        lines, its GPUs, its throughput), then its updates; the engine shown before keeps running, unheard."""
        if w is self.watch_:
            return
        if self.watch_ is not None:
            self.watch_.unsubscribe(self._engine_updated)
            self.watch_.background = True
        w.background = False
        self._watching(w)
        self.snap = w.snapshot(self.clock())
        self.gpu_snap = self.snap.gpus
        self.gpu_history = {i: h[-SPARK_SAMPLES:] for i, h in self.snap.gpu_history.items()}
        self.tp, self.tp_history = self.snap.throughput, list(self.snap.tps_history)[-CHART_SAMPLES:]
        if self.fleet is not None:
            self._logs_read(self.fleet.recent_lines(w.name))
        self._set_subtitle()
        self.render_all()

    def _watching(self, w: Engine) -> None:
        """The console's panels start over on `w`, and hear its updates."""
        self.watch_ = w
        self.deployment = w.name
        self.snap = empty_snapshot(w.name, w.host_name)
        self.gpu_snap, self.tp, self.steps = None, None, []
        self.gpu_history, self.tp_history = {}, []
        errors = self.query_one(ErrorLog)
        errors.entries.clear()
        errors.rebuild()
        w.subscribe(self._engine_updated)
        self._set_subtitle()

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def start_watch(self, name: str) -> None:
        if self.watch_ is not None:
            await self.watch_.close()
        dep = self.settings.deployments[name]
        w = Engine(self.settings, name, dep)
        self._watching(w)
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
        """Listener on the engine: its updates become messages (the engine never touches widgets)."""
        if self.watch_ is not None:
            self.post_message(EngineUpdated(u))

    def on_engine_updated(self, m: EngineUpdated) -> None:
        match m.update:
            case PhaseChanged(snapshot=snap):
                self._phase_changed(snap)
            case LogsRead() as read:
                self._logs_read(read)
            case GpusSampled(snapshot=snap, history=history):
                self.gpu_snap = snap
                self.gpu_history = {i: list(h)[-SPARK_SAMPLES:] for i, h in history.items()}
                self._dirty.add("gpus")
            case ThroughputSampled(sample=sample, history=history):
                self.tp = sample
                self.tp_history = list(history)[-CHART_SAMPLES:]
                self._dirty.add("throughput")
            case CollectorFailed():
                self._dirty.add("lifecycle")
            case HolderChanged(holder=holder):
                self._holder_changed(holder)
            case ProbeAnswered():
                pass  # the snapshot says it in words, drawn at the next tick

    def _phase_changed(self, snap: Snapshot) -> None:
        if snap.invocation != self.snap.invocation and not self.restarting:
            self.steps = []  # a run this console did not start: the steps of its own last action are history
        if snap.phase != self.snap.phase:
            self._dirty.add("throughput")  # its figures are labelled by whether the server serves: no sample says so
        self.snap = snap
        self._dirty.add("lifecycle")
        self._set_subtitle()
        if not self.paused:
            self.render_lifecycle()

    def _logs_read(self, read: LogsRead) -> None:
        """The engine sends lines in batches (at most ten a second, or a thousand lines): each is drawn as it
        comes, which leaves the loop free for keys between batches; while paused they wait for the resume."""
        with contextlib.suppress(NoMatches):  # the app is closing its panels
            self.query_one(ErrorLog).ingest(read.lines, read.kinds)
            self._flush_logs()

    def _holder_changed(self, holder: LockInfo | None) -> None:
        """Phases that move for no reason seen here are named: who, from where, doing what; its steps follow in
        the lifecycle panel's notes as it records them."""
        self._dirty.add("lifecycle")
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

    @property
    def covered(self) -> bool:
        """A screen that fills the terminal (the fleet overview) is over the panels: nothing of them can be seen,
        and drawing them would repaint that screen under them (Textual composites the screens below)."""
        return any(getattr(s, "COVERS_CONSOLE", False) for s in self.screen_stack)

    def _flush_logs(self) -> None:
        if self.paused or self.covered:  # not behind a dialog: a restart is confirmed over the server's current state
            return
        with contextlib.suppress(NoMatches):
            errors = self.query_one(ErrorLog)
            if errors.has_due:
                errors.flush()

    def _tick(self) -> None:
        """Re-render only what changed: panels get new data at 1-2 Hz, the phase clock needs a second's tick."""
        if self.paused:
            return
        was, self._was_covered = self._was_covered, self.covered
        if self._was_covered:
            return  # what changed meanwhile stays marked, and is drawn at the first tick uncovered
        with contextlib.suppress(NoMatches):  # the app is closing its panels
            if was:
                self._flush_logs()
            self._render_changed()

    def _render_changed(self) -> None:
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
            if n.source != NoteSource.THROUGHPUT:  # every collector's, the link's and another bringup's
                note = (note + "\n" if note else "") + n.text
        dep = self.settings.deployments.get(self.deployment)
        with contextlib.suppress(NoMatches):  # a message that arrives while the app is closing its panels
            self.query_one(LifecyclePanel).show(self.snap, self.clock(), self.steps, note,
                                                hide_flags=dep.hide_flags if dep else ())

    def render_gpus(self) -> None:
        unit = self.snap.unit
        gpus = self.watch_.deployment_gpus() if self.watch_ else list(range(len(self.gpu_snap.gpus)
                                                                             if self.gpu_snap else 0))
        # the memory the server is told to take (its flags, as the unit runs it): a GPU at it is normal, not warned
        dep = self.settings.deployments.get(self.deployment)
        preset = self.watch_.preset if self.watch_ else PRESETS.get(dep.preset) if dep else None
        budget = memory_budget(self.snap.flags, preset.memory_budget if preset is not None else None)
        # the memory other deployments of the host hold, named after them (a fleet's engines know each other's)
        holders = self.watch_.gpu.named_holders(unit is not None and unit.running) if self.watch_ else ()
        with contextlib.suppress(NoMatches):
            self.query_one(GpuPanel).show(self.gpu_snap, self.gpu_history, gpus, unit.main_pid if unit else 0,
                                          self.releasing, self.snap.attribution, budget, holders)

    def render_throughput(self, force_plot: bool = False) -> None:
        note = ""
        for n in self.snap.notes:
            if n.source == NoteSource.THROUGHPUT:
                note = n.text
        if self.tp is None and self.snap.phase == Phase.READY and not note:
            note = "no metrics yet (no /metrics and no throughput log lines)"
        now = time.monotonic()
        plot = force_plot or now - self._last_plot >= PLOT_EVERY_S
        if plot:
            self._last_plot = now
        with contextlib.suppress(NoMatches):
            panel = self.query_one(ThroughputPanel)
            # when samples stop the panel redraws itself (its chart's "now" keeps moving), on this clock, unpaused
            panel.clock, panel.live = self.clock, lambda: not self.paused
            panel.show(self.tp, self.tp_history, note, plot=plot, now=self.clock(),
                       serving=self.snap.phase == Phase.READY)

    # ------------------------------------------------------------------ actions: viewing

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.watch_ is not None:
            self.watch_.paused = self.paused
        self.render_lifecycle()
        if not self.paused:
            self._flush_logs()
            self.render_all()

    def action_probe_now(self) -> None:
        """Once ready and serving, the console probes every 30 s only: this asks for a generation now."""
        if self.watch_ is not None:
            self.watch_.probe_now()
            self.notify("probing the endpoint with a real generation", timeout=2)

    def _maximized(self, was: Widget | None, now: Widget | None) -> None:
        """A maximized panel (Textual's maximize, from the command palette) says how to come back: Esc."""
        for widget, on in ((was, False), (now, True)):
            if isinstance(widget, ErrorLog):
                widget.set_maximized(on)  # its subtitle also counts the new lines
            elif widget is not None and widget.has_class("panel"):
                widget.border_subtitle = RESTORE_HINT if on else ""

    async def action_quit(self) -> None:
        if self.watch_ is not None:
            await self.watch_.close()
            self.watch_ = None
        if self.fleet is not None:
            await self.fleet.close()
        self.exit(ExitCode.OK)

