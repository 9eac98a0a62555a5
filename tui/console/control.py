"""The full console: the read-only one plus restart, flags and start/stop, each behind a confirmation, and the
rollback offered after this console's own restart failed. The actions run the same protocols as the CLI, in
workers, and report through messages (`RestartStepped`, `RestartFinished`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from textual import work
from textual.screen import Screen

from tui.console.messages import RestartFinished, RestartStepped
from tui.console.overview import CONSOLE_MODE
from tui.console.port import ConsoleEngine
from tui.console.screen import ConsoleScreen, ControlConsoleScreen
from tui.console.viewer import ConsoleApp
from tui.lifecycle.flags import FlagChange
from tui.managers import ManagerError
from tui.model import Outcome, Result, Step
from tui.ops import restart as protocol
from tui.ops.change import ChangePlan, ChangeRefused, Refusal, last_ready, moved_since, plan_change
from tui.ops.evidence import CONSOLE_OVERRIDE
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen
from tui.transport import TransportError


class ControlConsoleApp(ConsoleApp):
    """The full console: adds restart, flags and start/stop, each behind a confirmation."""

    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {CONSOLE_MODE: ControlConsoleScreen}
    SCREEN: ClassVar[type[ConsoleScreen]] = ControlConsoleScreen

    def _where(self, w: ConsoleEngine) -> str:
        """`sim-d on gpu-b`: every dialog that can lead to an action names the deployment and its host in its title,
        from the engine the action will run on (not from whatever the console shows by the time it opens)."""
        return f"{w.name} on {w.host_name}"

    def _target_lines(self, w: ConsoleEngine) -> list[str]:
        return [f"deployment: {w.name}", f"host:       {w.host_name}", f"target:     {w.manager.target}"]

    def _still_shown(self, w: ConsoleEngine, todo: str) -> bool:
        """An answer acts on the deployment the console shows; if it shows another one by the time the dialog is
        answered (Enter on another row of the overview while its flags were being read), nothing is done, and
        the notice says what to do (`todo`, once `w` is open again)."""
        if w is self.engine:
            return True
        self.notify(f"nothing was done to {w.name}: the console shows {self.deployment} now; open {w.name} and "
                    f"{todo}", title=f"{w.name}: not acted on", severity="warning", timeout=10, markup=False)
        return False

    def _cannot(self, title: str, e: BaseException, done: str, retry: str) -> None:
        """An action could not read or reach the deployment. Shown as an error in the console, never fatal (an
        operator whose host is down needs the console most): the cause, what was `done` about it (nothing, as a
        rule), and what to do: fix the cause, then `retry` (the key that tries again)."""
        w = self.engine
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

    async def _flags_unchanged(self, w: ConsoleEngine, plan: ChangePlan, key: str) -> bool:
        """Whether the flags are still those a dialog was computed from. A yes to a dialog over flags someone
        else has changed since would undo their change (a rollback computed before another operator's restart
        reverted it): the console re-reads them first and, if they moved, does nothing and says so (the protocol
        would refuse the plan under the lock all the same, but as an error after taking it)."""
        try:
            change = await moved_since(w, plan)
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot re-read the flags", e, "nothing was done", f"press {key} to try again")
            return False
        if not change:
            return True
        self.notify("the flags changed after the dialog opened, so nothing was done (it would have undone "
                    f"that change): {'; '.join(change)}\npress {key} to decide again over the flags as they are "
                    "now", title=f"{self.deployment}: not restarted: flags changed meanwhile", severity="warning",
                    timeout=20, markup=False)
        return False

    @work(exclusive=True, group="dialog", exit_on_error=False)
    async def confirm_restart(self, changes: list[FlagChange], key: str = "r", without_gpu_evidence: bool = False) \
            -> None:
        """Read the flags (over SSH: off the message loop, so the console keeps answering meanwhile) and ask. A host
        with no GPU readings gets a dialog that says why and has nothing to confirm, only the named override, which
        asks again with the risk said (`without_gpu_evidence`)."""
        w = self.engine
        if w is None:
            self.notify("not connected yet", severity="warning")
            return
        if self._busy() or await self._held_by_another(w, key):
            return
        try:
            # the confirmation that shows the change is this console's force: a change to no effect is shown as
            # "no flag change" and asked about, not refused
            plan = await plan_change(w, edits=changes, force=True, gpus=w, without_gpu_evidence=without_gpu_evidence)
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot read its flags", e, "nothing was changed", f"press {key} to try again")
            return
        if isinstance(plan, ChangeRefused) and plan.reason is Refusal.NO_GPU_EVIDENCE:
            def overridden(chosen: bool | None) -> None:
                if chosen and self._still_shown(w, f"press {key} again"):
                    self.confirm_restart(changes, key, without_gpu_evidence=True)

            self.push_screen(ConfirmScreen(f"Cannot restart {self._where(w)}: no GPU readings",
                                           [*self._target_lines(w), "", plan.message], refused=True,
                                           override=CONSOLE_OVERRIDE), overridden)
            return
        if isinstance(plan, ChangeRefused):
            self.notify(plan.message, severity="error", markup=False)
            return
        how = ("stop, wait for GPU memory release, start, verify a real generation" if not without_gpu_evidence else
               "WITHOUT GPU evidence: stop, start once the old run's processes are gone (its GPU memory release NOT "
               "verified: a CUDA OOM is possible), verify a real generation")
        lines = [*self._target_lines(w), "", "flags:", *("  " + c for c in plan.changes or ["no flag change"]), "",
                 *(f"  {d}" for d in plan.drift), *([""] if plan.drift else []), how]

        def answered(yes: bool | None) -> None:
            # a No drops the change: a later `r` restarts with the flags as they are
            if yes and self._still_shown(w, f"press {key} again"):
                self.run_protocol(plan, True, key=key, without_gpu_evidence=without_gpu_evidence)

        self.push_screen(ConfirmScreen(f"Restart {self._where(w)}?", lines), answered)

    async def _held_by_another(self, w: ConsoleEngine, key: str) -> bool:
        """Another bringup holds the deployment's lock (its restart, start or stop): said, naming it, instead of a
        dialog whose yes the lock would refuse (issue 51). A lock that cannot be read is left to the protocol."""
        try:
            holder = await w.holder_now()
        except Exception:  # the protocol takes the lock itself, and says so if it cannot
            return False
        if holder is None:
            return False
        self.notify(f"another bringup holds the lock of {w.name}: {holder.describe()}\nnothing was done; press "
                    f"{key} again once it is done", title=f"{w.name}: busy", severity="warning", timeout=15,
                    markup=False)
        return True

    def action_restart(self) -> None:
        self.confirm_restart([])

    def action_flags(self) -> None:
        if self.engine is None:
            self.notify("not connected yet", severity="warning")
            return
        self.open_flags()

    @work(exclusive=True, group="dialog", exit_on_error=False)
    async def open_flags(self) -> None:
        w = self.engine
        if w is None or await self._held_by_another(w, "f"):
            return
        try:
            values = await w.flag_values()
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot read its flags", e, "nothing was changed", "press f to try again")
            return
        dep = self.settings.deployments[w.name]

        def applied(changes: list[FlagChange] | None) -> None:
            if changes and self._still_shown(w, "press f again"):
                self.confirm_restart(changes, "f")

        self.push_screen(FlagsScreen(w.editable_flags(values), values, dep.flags, target=self._where(w)), applied)

    def action_start_stop(self) -> None:
        w = self.engine
        if w is None or self._busy():
            return
        snap = w.snapshot()
        unit = snap.unit
        if unit is None:  # neither Start nor Stop is known to be the right offer
            why = snap.collector_errors.get("unit", "")
            self.notify(f"cannot tell whether it is running: {why or 'its state has not been read yet'}\n"
                        "press s again once the console shows its state", title=f"{self.deployment}: no start/stop",
                        severity="error" if why else "warning", markup=False)
            return
        running = unit.running
        verb = "Stop" if running else "Start"

        def answered(yes: bool | None) -> None:
            if not yes or not self._still_shown(w, "press s again"):
                return
            if running:
                self.run_stop()
            else:
                self.run_protocol(None, False, key="s")

        self.push_screen(ConfirmScreen(f"{verb} {self._where(w)}?", self._target_lines(w)), answered)

    def _busy(self) -> bool:
        """An action of this console is under way: a second one waits its turn (never cancels it midway)."""
        if self.restarting:
            self.notify("a restart is already running", title=self.deployment, severity="warning")
        return self.restarting

    @work(group="ops", exit_on_error=False)
    async def run_stop(self) -> None:
        w = self.engine
        if w is None or self._busy():
            return
        self.restarting = True
        self.shown.steps = []
        self.render_lifecycle()
        try:
            # under the deployment's lock, like a restart, and done when the GPU memory is released
            def stepped(s: Step) -> None:
                self.post_message(RestartStepped(s))

            outcome = await protocol.stop(w, stepped)
        except Exception as e:  # shown, never fatal to the console
            outcome = Outcome(Result.FAILED, w.state.phase, f"{type(e).__name__}: {e}")
        finally:
            self.restarting = False
        self.post_message(RestartFinished(outcome, "stop", "s"))

    @work(group="ops", exit_on_error=False)
    async def run_protocol(self, plan: ChangePlan | None, restart: bool, *, key: str = "r",
                           without_gpu_evidence: bool = False) -> None:
        """The restart protocol with a confirmed plan (None: a start with the flags as they are). If the flags
        changed since the plan was computed from them, nothing is done."""
        w = self.engine
        if w is None or self._busy():
            return
        self.restarting = True
        try:
            if plan is not None and not await self._flags_unchanged(w, plan, key):
                return
            self.shown.steps = []

            def stepped(s: Step) -> None:
                self.post_message(RestartStepped(s))

            outcome = await protocol.run(w, plan, stepped, stop_first=restart,
                                         purpose="restart" if restart else "start", rollback=False,
                                         without_gpu_evidence=without_gpu_evidence)
        except Exception as e:  # shown, never fatal to the console
            outcome = Outcome(Result.FAILED, w.state.phase, f"{type(e).__name__}: {e}")
        finally:
            self.restarting = False
            self.shown.releasing = False
        self.post_message(RestartFinished(outcome, "restart" if restart else "start", key))

    def on_restart_finished(self, m: RestartFinished) -> None:
        """Say how it ended. A rollback is offered only when this console's own restart ran and the server failed:
        not when it was refused (another bringup holds the lock: the flags are that one's, not ours to undo), not
        when it ran out of time, not when it never started."""
        o, what, key = m.outcome, m.action, m.key
        title = f"{self.deployment}: {what}"
        self.action_notes.pop(self.deployment, None)
        if o.result in (Result.SUPERSEDED, Result.TIMED_OUT, Result.UNVERIFIED):
            when = time.strftime("%H:%M:%S", time.localtime(self.clock()))
            self.action_notes[self.deployment] = (f"{what} "
                                                  f"{'superseded' if o.result is Result.SUPERSEDED else 'timed out'} "
                                                  f"at {when}: {o.message}")
        if o.ok:
            self.notify(o.message, title=title, markup=False)
            return
        if o.result is Result.LOCK_HELD:
            self.notify(f"refused: {o.message}\nnothing was changed: the lifecycle panel follows its run; press "
                        f"{key} again after it, if still needed", title=f"{title} refused", severity="warning",
                        timeout=20, markup=False)
            return
        ours = what != "stop" and o.result is Result.FAILED and o.took_lock
        if o.failure is not None:
            todo = "the lifecycle panel has the hint, e the errors"
        elif o.result is Result.UNVERIFIED:  # no GPU readings within release_timeout_s: nothing was started
            todo = (f"nothing was started: fix the host's GPU readings (nvidia_smi, NVML), or set "
                    f"unverified_release_grace_s to accept the risk of an OOM; then press {key}")
        elif o.result in (Result.TIMED_OUT, Result.SUPERSEDED):
            todo = "the lifecycle panel follows what runs now"
        else:
            todo = f"press {key} to try again once that is fixed"
        self.notify(f"{o.message}\n{todo}", title=f"{title} failed", severity="error", timeout=20, markup=False)
        if ours and self.engine is not None:
            self.offer_rollback(self.engine)

    @work(exclusive=True, group="rollback", exit_on_error=False)
    async def offer_rollback(self, w: ConsoleEngine) -> None:
        """Offer the last flags that reached ready to `w`, the engine whose restart failed (read before the console
        may show another deployment: the offer names it, and a yes acts on it only while it is shown)."""
        try:
            good = await last_ready(w)
        except Exception as e:  # shown, never fatal to the console
            self._cannot("cannot read its flags", e, "no rollback offered",
                         "press f to see the flags and set them back")
            return
        if good is None or good.same:
            return
        back = good.back

        def answered(yes: bool | None) -> None:
            if yes and self._still_shown(w, "press f to set its flags back"):
                self.run_protocol(back, True)

        self.push_screen(ConfirmScreen(f"Roll back {self._where(w)}?", [
            *self._target_lines(w), "", "back to the last flags that reached ready:",
            *("  " + c for c in back.changes or ["the last flags that reached ready"])]), answered)
