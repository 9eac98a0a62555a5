"""The console in a real terminal, as a new user meets it: tmux runs `bringup demo`, we read the screen with
capture-pane and press keys with send-keys. Also: losing the terminal (SIGHUP) ends the app and its server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.simdeploy import free_port
from tests.helpers.tmux import TMUX_S, Tmux, ppid, procs_with
from tests.helpers.wait import slack, until

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


@pytest.fixture
def demo_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRINGUP_", "TMUX"))}
    env.update(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               BRINGUP_DEMO_PORT=str(free_port()), TERM="xterm-256color")
    return env


def start_demo(tmp_path: Path, env: dict[str, str]) -> Tmux:
    t = Tmux(tmp_path)
    cmd = f"{sys.executable} -m tui demo --time-scale 0.2"  # each test has its own tmux server
    subprocess.run(["tmux", "-S", t.sock, "new-session", "-d", "-s", t.session, "-x", "120", "-y", "36",
                    "-c", str(tmp_path), cmd], env=env, check=True, timeout=slack(TMUX_S))
    return t


def test_new_user_demo_in_tmux(tmp_path: Path, demo_env: dict[str, str]) -> None:
    t = start_demo(tmp_path, demo_env)
    try:
        first = t.wait_for("Throughput", 15)
        screen = t.screen()
        for panel in ("Lifecycle", "GPUs", "Log", "Throughput"):
            assert panel in screen
        print(f"all four panels on screen {first:.2f} s after launch")
        t.wait_for("READY", 40)
        inv_before = [ln for ln in t.screen().splitlines() if "run " in ln]
        t("send-keys", "-t", t.session, "r")
        t.wait_for("Restart demo on local?", 10)
        t("send-keys", "-t", t.session, "y")
        t.wait_for("✓ release", 20)  # the step done, not the word in the dialog
        def ready_again() -> bool:  # READY again, for a new run
            screen = t.screen()
            return "READY" in screen and "Restart demo on local?" not in screen and \
                [ln for ln in screen.splitlines() if "run " in ln] != inv_before

        until(lambda: f"READY again, for a new run:\n{t.screen()}", ready_again, 60, every=0.2)
        t("send-keys", "-t", t.session, "q")
        until("the demo server stopped on quit", lambda: not procs_with(str(tmp_path / "state")), 20, every=0.2)
    finally:
        t("kill-server")
        for pid in procs_with(str(tmp_path)):
            os.kill(pid, 9)


def test_sighup_ends_app_and_demo_server(tmp_path: Path, demo_env: dict[str, str]) -> None:
    t = start_demo(tmp_path, demo_env)
    try:
        t.wait_for("GPUs", 15)
        t.wait_for("LOADING", 30)
        pane = int(t("display-message", "-p", "-t", t.session, "#{pane_pid}").strip())
        app_pids = [pane, *(p for p in procs_with("-m tui demo") if ppid(p) == pane)]
        assert any("tui" in Path(f"/proc/{p}/cmdline").read_text(errors="replace") for p in app_pids)
        t("kill-server")  # the terminal goes away: the app gets SIGHUP
        alive = lambda: [p for p in app_pids if Path(f"/proc/{p}").exists()]  # noqa: E731
        until("the console gone after SIGHUP", lambda: not alive(), 20, every=0.2)
        until("the demo server gone with the console", lambda: not procs_with(str(tmp_path / "state")), 20,
              every=0.2)
    finally:
        t("kill-server")
        for pid in procs_with(str(tmp_path)):
            os.kill(pid, 9)


def test_sigterm_quits_like_q_and_stops_the_demo_server(tmp_path: Path, demo_env: dict[str, str]) -> None:
    """`kill <pid>` from a supervisor or a shell must not leave the simulated server running."""
    t = start_demo(tmp_path, demo_env)
    try:
        t.wait_for("READY", 40)
        pane = int(t("display-message", "-p", "-t", t.session, "#{pane_pid}").strip())
        assert procs_with(str(tmp_path / "state")), "the demo server is not running"
        os.kill(pane, 15)
        until("the console gone after SIGTERM", lambda: not Path(f"/proc/{pane}").exists(), 20, every=0.2)
        until("the demo server gone with the console", lambda: not procs_with(str(tmp_path / "state")), 20,
              every=0.2)
    finally:
        t("kill-server")
        for pid in procs_with(str(tmp_path)):
            os.kill(pid, 9)
