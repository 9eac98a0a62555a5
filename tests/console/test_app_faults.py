"""Pilot tests: the console survives every way an action can fail to read or reach the deployment, and never
offers the wrong action (a rollback after a refused restart, or one computed from flags that changed since).

The deployment is the sim's `process` deployment, never started: its Engine is real (real manager, real lock file,
real argv files), and the failures are injected by replacing the manager's methods with ones that raise the
errors the real SSH transport and systemd manager raise (their own paths are tested in test_remote.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from textual.binding import Binding

from tests.helpers.console_app import Note, console, failed_own_restart, record_notes
from tests.helpers.pilot import settled, until
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.console.messages import RestartFinished
from tui.engine import Engine
from tui.managers import ManagerError
from tui.model import Phase, UnitObserved, UnitState
from tui.ops import restart as protocol
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen
from tui.transport import TransportError
from tui.transport.ssh_errors import explain

#: the three ways a unit cannot be read, with the messages the real manager and transport give
FAILURES: dict[str, Callable[[], Exception]] = {
    "unit-not-found": lambda: ManagerError("unit sglang.service not found on gpu-box (`systemctl list-units "
                                           "'*sglang*'` lists what is there)"),
    "unreachable": lambda: TransportError(explain("gpu-box", TimeoutError())),
    "host-key": lambda: TransportError(explain("gpu-box", asyncssh.HostKeyNotVerifiable(
        "Host key is not trusted for host gpu-box"))),
}
CAUSE = {"unit-not-found": "unit sglang.service not found", "unreachable": "SSH connection timed out",
         "host-key": "host key"}


class BrokenLock:
    async def __aenter__(self) -> None:
        raise self.error

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __init__(self, error: Exception) -> None:
        self.error = error


def break_manager(w: Engine, make: Callable[[], Exception]) -> None:
    """Every call that reaches the host fails as `make` says (the host is down, its key unknown, the unit gone)."""
    async def fail(*args: object, **kw: object) -> Any:
        raise make()

    m: Any = w.manager
    for name in ("state", "read_argv", "write_argv", "read_saved_argv", "save_argv", "start", "stop", "pids"):
        setattr(m, name, fail)
    m.lock = lambda *a, **k: BrokenLock(make())


def see_unit(w: Engine, running: bool) -> None:
    """The unit as last read, before the host became unreachable."""
    unit = (UnitState(active="active", sub="running", main_pid=4242, invocation="aaaaaaaa1111")
            if running else UnitState(active="inactive", sub="dead"))
    w.feed(UnitObserved(time.time(), unit))




def error_with(notes: list[Note], cause: str, todo: str) -> Note | None:
    """The error notification that names the cause and says what to do."""
    return next((n for n in notes if n.severity == "error" and cause in n.message and todo in n.message), None)


# ---------------------------------------------------------------------------------------------------- 1. never die


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_r_when_the_flags_cannot_be_read_says_why_and_opens_no_dialog(tmp_path: Path, failure: str) -> None:
    app, w = console(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        break_manager(w, FAILURES[failure])
        await pilot.press("r")
        assert await until(pilot, lambda: error_with(notes, CAUSE[failure], "press r") is not None), notes
        assert app.is_running and not isinstance(app.screen, ConfirmScreen)
        assert not app.restarting
    await w.close()


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_f_when_the_flags_cannot_be_read_says_why_and_opens_no_dialog(tmp_path: Path, failure: str) -> None:
    app, w = console(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        break_manager(w, FAILURES[failure])
        await pilot.press("f")
        assert await until(pilot, lambda: error_with(notes, CAUSE[failure], "press f") is not None), notes
        assert app.is_running and not isinstance(app.screen, FlagsScreen)
    await w.close()


@pytest.mark.parametrize("running", [False, True], ids=["start", "stop"])
@pytest.mark.parametrize("failure", list(FAILURES))
async def test_s_when_the_unit_cannot_be_reached_says_why(tmp_path: Path, failure: str, running: bool) -> None:
    """s offers what the unit's last known state allows; the start (or stop) then fails on the host: the console
    says why, offers no rollback (nothing of ours ran), and keeps running."""
    app, w = console(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        see_unit(w, running)
        break_manager(w, FAILURES[failure])
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text.startswith("Stop" if running else "Start")
        await pilot.press("y")
        assert await until(pilot, lambda: error_with(notes, CAUSE[failure], "press s") is not None), notes
        await settled(pilot)
        assert app.is_running and not isinstance(app.screen, ConfirmScreen)  # no rollback offered
        assert not app.restarting
    await w.close()


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_the_rollback_offer_after_a_failed_restart_when_the_flags_cannot_be_read(
        tmp_path: Path, failure: str) -> None:
    """The restart failed, and reading the flags for the rollback offer fails too (the SSH connection went with
    the server): the failure and the reason no rollback is offered are both shown."""
    app, w = console(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        break_manager(w, FAILURES[failure])
        app.post_message(RestartFinished(failed_own_restart()))
        assert await until(pilot, lambda: error_with(notes, CAUSE[failure], "press f") is not None), notes
        assert any(n.severity == "error" and "cuda-graph" in n.message for n in notes), notes
        await settled(pilot)
        assert app.is_running and not isinstance(app.screen, ConfirmScreen)
    await w.close()


async def test_s_on_a_unit_never_read_offers_nothing_and_says_why(tmp_path: Path) -> None:
    """Unit state unknown (the host cannot be reached): neither Start nor Stop is the right offer."""
    app, w = console(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        w.collector_errors["unit"] = "gpu-box: SSH connection timed out"
        await pilot.press("s")
        await settled(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert error_with(notes, "SSH connection timed out", "press s") is not None, notes
    await w.close()


async def test_a_markup_like_error_text_is_shown_literally(tmp_path: Path) -> None:
    """Error text is data: `[/]` in it (an SSH or server message) once made the toast raise a MarkupError."""
    app, w = console(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        break_manager(w, lambda: TransportError("gpu-box: SSH error: [Errno 113] No route [/] to host"))
        await pilot.press("r")
        assert await until(pilot, lambda: error_with(notes, "[Errno 113] No route [/]", "press r") is not None)
        await settled(pilot)  # the toast is drawn
        assert app.is_running
    await w.close()


async def test_an_unexpected_error_in_a_worker_is_shown_not_swallowed(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug past what an action expects ends its worker: the error is shown (it was silent), the console lives."""
    import tui.console.control

    def bug(*a: object, **k: object) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(tui.console.control, "ConfirmScreen", bug)  # past what the worker expects to fail
    app, w = console(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        await pilot.press("r")
        assert await until(pilot, lambda: any(n.severity == "error" and "KeyError" in n.message
                                              for n in notes)), notes
        assert app.is_running
    await w.close()


class CrashingConsole(ControlConsoleApp):
    CSS_PATH = str(Path(__file__).parents[2] / "tui" / "app.tcss")  # Textual reads it next to the subclass
    BINDINGS = [Binding("x", "crash", "Crash")]

    def action_crash(self) -> None:
        raise RuntimeError("a bug in a handler")


def test_a_console_that_dies_of_an_uncaught_exception_exits_non_zero(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Textual restores the terminal, prints the traceback and sets return_code 1; `app.run()` itself returns
    None, which the console used to turn into exit status 0."""
    from tui.console.run import exit_status

    app = CrashingConsole(settings_for(tmp_path), "sim", live=False)

    async def crash(pilot: Any) -> None:
        await pilot.pause()
        await pilot.press("x")

    result = app.run(headless=True, size=(100, 30), auto_pilot=crash)
    assert result is None
    assert exit_status(app, result) == 1
    err = capsys.readouterr().err.splitlines()
    mine = [ln for ln in err if ln.startswith("bringup:")]
    assert len(mine) == 1 and "RuntimeError: a bug in a handler" in mine[0], err[-5:]


def test_a_clean_exit_and_a_signal_keep_their_status(tmp_path: Path) -> None:
    from tui.console.run import exit_status

    for result, code in ((0, 0), (None, 0), (128 + 15, 143)):
        app = ControlConsoleApp(settings_for(tmp_path / str(code)), "sim", live=False)
        assert exit_status(app, result) == code


# ----------------------------------------------------------------------- 2. never offer the wrong action


async def test_a_restart_refused_by_the_lock_says_who_holds_it_and_offers_no_rollback(tmp_path: Path) -> None:
    """A CLI restart that adds --disable-cuda-graph is in flight and holds the lock; `r`, `y` in the console is
    refused. The console once called that a failed restart and offered to roll back the other operator's flag."""
    app, w = console(tmp_path)
    base = await w.argv()
    theirs = [*base, "--disable-cuda-graph"]
    await w.manager.save_argv("ready", base)
    await w.manager.write_argv(theirs)
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        async with w.manager.lock("restart sim"):
            await pilot.press("r")
            assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            assert await until(pilot, lambda: any("refused" in n.message for n in notes)), notes
            await settled(pilot)
            assert not isinstance(app.screen, ConfirmScreen), app.screen.title_text  # type: ignore[attr-defined]
        refused = next(n for n in notes if "refused" in n.message)
        assert refused.message.startswith("refused: another bringup is already restarting this deployment")
        assert f"pid {os.getpid()}" in refused.message  # who holds it
        assert not any("Roll back" in n.message or n.title == "restart failed" for n in notes), notes
    assert await w.argv() == theirs
    await w.close()


@pytest.mark.parametrize("outcome", [
    protocol.Outcome(protocol.Result.TIMED_OUT, Phase.STOPPED, "GPU memory was not released within 120 s; not "
                     "starting", steps=tuple(protocol.Step(s, "done", s) for s in ("lock", "flags", "stop"))),
    protocol.Outcome(protocol.Result.TIMED_OUT, Phase.LOADING, "not ready within 600 s (last phase: loading)",
                     steps=tuple(protocol.Step(s, "done", s) for s in ("lock", "flags", "stop", "release", "start"))),
    protocol.Outcome(protocol.Result.LOCK_HELD, Phase.READY, "another bringup is already restarting this deployment: "
                     "x (pid 1)", steps=(protocol.Step("lock", "failed", "another bringup is already restarting"),)),
    protocol.Outcome(protocol.Result.FAILED, Phase.FAILED, "RestartError: sim is observe-only"),
], ids=["release-timed-out", "ready-timed-out", "refused", "not-started"])
async def test_no_rollback_is_offered_unless_this_consoles_own_restart_failed(
        tmp_path: Path, outcome: protocol.Outcome) -> None:
    app, w = console(tmp_path)
    base = await w.argv()
    await w.manager.save_argv("ready", base)
    await w.manager.write_argv([*base, "--disable-cuda-graph"])
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        app.post_message(RestartFinished(outcome))
        await settled(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert notes and outcome.message.split(";")[0] in notes[0].message
    await w.close()


@pytest.fixture
def protocol_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str] | None]:
    """The restarts the console asks for, recorded instead of run."""
    calls: list[list[str] | None] = []

    async def run(watch: Engine, target: protocol.ChangePlan | None, on_step: object,
                  **kw: object) -> protocol.Outcome:
        calls.append(None if target is None else list(target.new))
        return protocol.Outcome(protocol.Result.DONE, Phase.READY, "ready")

    monkeypatch.setattr(protocol, "run", run)
    return calls


async def offer_rollback(app: ControlConsoleApp, pilot: Any) -> ConfirmScreen:
    app.post_message(RestartFinished(failed_own_restart()))
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    assert isinstance(app.screen, ConfirmScreen)
    assert app.screen.title_text == "Roll back sim on simhost?"
    assert "- --disable-cuda-graph" in "\n".join(app.screen.lines)
    return app.screen


async def test_a_rollback_accepted_after_the_flags_changed_does_not_restart(
        tmp_path: Path, protocol_runs: list[list[str] | None]) -> None:
    app, w = console(tmp_path)
    base = await w.argv()
    await w.manager.save_argv("ready", base)
    await w.manager.write_argv([*base, "--disable-cuda-graph"])  # this console's restart, which failed
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        await offer_rollback(app, pilot)
        other = [*base, "--disable-cuda-graph", "--mem-fraction-static", "0.8"]
        await w.manager.write_argv(other)  # meanwhile, another operator's restart
        await pilot.press("y")
        assert await until(pilot, lambda: any("changed" in n.message for n in notes)), notes
        await settled(pilot)
        assert protocol_runs == []
        assert not app.restarting
        note = next(n for n in notes if "changed" in n.message)
        assert "mem-fraction-static" in note.message and note.severity != "information"
    assert await w.argv() == other
    await w.close()


async def test_a_rollback_accepted_with_the_flags_as_offered_restarts_with_the_last_ready_flags(
        tmp_path: Path, protocol_runs: list[list[str] | None]) -> None:
    app, w = console(tmp_path)
    base = await w.argv()
    await w.manager.save_argv("ready", base)
    await w.manager.write_argv([*base, "--disable-cuda-graph"])
    async with app.run_test(size=(100, 30)) as pilot:
        await offer_rollback(app, pilot)
        await pilot.press("y")
        assert await until(pilot, lambda: protocol_runs == [base]), protocol_runs
    await w.close()


async def test_a_restart_confirmed_after_the_flags_changed_does_not_restart(
        tmp_path: Path, protocol_runs: list[list[str] | None]) -> None:
    """The confirmation names the flag change; if the flags changed while it was open, a yes would write the
    other operator's change back out: the console refuses and says so."""
    app, w = console(tmp_path)
    base = await w.argv()
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        await pilot.press("r")
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await w.manager.write_argv([*base, "--disable-cuda-graph"])
        await pilot.press("y")
        assert await until(pilot, lambda: any("changed" in n.message for n in notes)), notes
        await settled(pilot)
        assert protocol_runs == []
        await pilot.press("r")  # asked again, over the flags as they are now (and the GPUs read): it goes ahead
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await until(pilot, lambda: protocol_runs == [[*base, "--disable-cuda-graph"]]), protocol_runs
    await w.close()


async def test_a_stop_while_another_bringup_restarts_is_refused_by_the_lock(tmp_path: Path) -> None:
    """`s` stops under the deployment's lock, like a restart: it can no longer stop the server in the middle of
    another operator's restart."""
    app, w = console(tmp_path)
    w.feed(UnitObserved(time.time(), UnitState(active="active", sub="running", main_pid=os.getpid(),
                                               invocation="theirs", started_at=time.time())))
    stopped: list[bool] = []

    async def stop() -> None:
        stopped.append(True)

    w.manager.stop = stop  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        async with w.manager.lock("restart sim"):
            await pilot.press("s")
            assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            assert await until(pilot, lambda: any("refused" in n.message for n in notes)), notes
        assert stopped == []
        assert f"pid {os.getpid()}" in next(n for n in notes if "refused" in n.message).message
    await w.close()
