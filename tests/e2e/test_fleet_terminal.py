"""The fleet overview in a real terminal: tmux runs `bringup --config CFG` with three deployments configured (two
simulated servers sharing one 8-GPU box, one on an SSH host nobody answers), and we read the screen with
capture-pane and press keys with send-keys: a row per deployment with its phase, `/` narrows the rows, Enter opens
a deployment's console, Esc comes back, `q` quits with exit 0. The suite's autouse `no_leftover_processes`
(tests/conftest.py) fails the test if anything started with the test's tmp dir on its command line outlives it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.processes import kill_processes, sim_processes
from tests.helpers.simdeploy import two_on_one_box
from tests.helpers.tmux import Tmux, procs_with
from tests.helpers.wait import slack, until

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def row(screen: str, name: str) -> str:
    """The overview's line for deployment `name` ('' when it is not shown)."""
    return next((ln for ln in screen.splitlines() if f" {name} " in ln), "")


def consoles(cfg: Path) -> list[tuple[int, str]]:
    """Live bringup consoles of this config (not the pane's shell that started one)."""
    out = []
    for pid in procs_with(f"-m tui --config {cfg}"):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if cmd and cmd[0].decode(errors="replace") == sys.executable:
            out.append((pid, " ".join(c.decode(errors="replace") for c in cmd)))
    return out


def wait_until(t: Tmux, pred: Callable[[str], object], what: str, timeout: float) -> str:
    """The screen once `pred` holds on it (the shared wait, tests/helpers/wait.py, saying what was on it if not)."""
    return until(lambda: f"{what}, on screen:\n{t.screen()}",
                 lambda: screen if pred(screen := t.screen()) else "", timeout, every=0.1)


def test_fleet_overview_in_tmux(tmp_path: Path) -> None:
    cfg = two_on_one_box(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRINGUP_", "TMUX"))}
    env.update(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "xdg-state"),
               XDG_CONFIG_HOME=str(tmp_path / "cfg"), TERM="xterm-256color")
    t = Tmux(tmp_path)
    # the shell prints the console's exit status and stays, so that the pane can be read after it quits
    cmd = f"{sys.executable} -m tui --config {cfg}; echo EXIT=$?; sleep 60"
    subprocess.run(["tmux", "-S", t.sock, "new-session", "-d", "-s", t.session, "-x", "140", "-y", "36",
                    "-c", str(tmp_path), cmd], env=env, check=True, timeout=slack(10))
    try:
        # the overview, not a deployment: a row each, the sims stopped, the SSH host down
        t.wait_for("Deployments (3)", 20)
        screen = wait_until(t, lambda s: "stopped" in row(s, "sim-a") and "stopped" in row(s, "sim-b")
                            and "host down" in row(s, "far").lower(),
                            "a row per deployment with its phase", 30)
        assert "Lifecycle" not in screen  # no deployment's console yet

        # `/` narrows the rows as the text is typed; Enter keeps the filter and goes back to the table
        t("send-keys", "-t", t.session, "/")
        t.wait_for("filter: name, host or phase", 10)
        t("send-keys", "-t", t.session, "-l", "sim-b")
        screen = wait_until(t, lambda s: "Deployments (1 of 3)" in s and row(s, "sim-b") and not row(s, "sim-a")
                            and not row(s, "far"), "the filter narrowing the rows to sim-b", 10)
        t("send-keys", "-t", t.session, "Enter")
        wait_until(t, lambda s: "filter: name, host or phase" not in s and "/sim-b" in s,
                   "the filter kept, its box closed", 10)

        # Enter opens the selected (the only shown) deployment's console: its lifecycle panel, its name
        t("send-keys", "-t", t.session, "Enter")
        screen = wait_until(t, lambda s: "Lifecycle" in s and "Deployments (" not in s,
                            "sim-b's console", 20)
        assert "sim-b" in screen and "STOPPED" in screen.upper(), screen

        # Esc comes back to the overview, the filter as it was
        t("send-keys", "-t", t.session, "Escape")
        wait_until(t, lambda s: "Deployments (1 of 3)" in s and "Lifecycle" not in s, "the overview again", 10)
        # Esc there clears the filter: every row again
        t("send-keys", "-t", t.session, "Escape")
        wait_until(t, lambda s: "Deployments (3)" in s and row(s, "sim-a") and row(s, "far"),
                   "every row after Esc", 10)

        t("send-keys", "-t", t.session, "q")
        wait_until(t, lambda s: "EXIT=" in s, "the console's exit", 20)
        assert "EXIT=0" in t.screen(), t.screen()
        assert consoles(cfg) == [], "the console still runs after q"
        assert sim_processes(str(tmp_path) + os.sep) == [], "bringup left a process behind"
    finally:
        t("kill-server")
        kill_processes(consoles(cfg))  # a console that did not quit; servers and stand-ins are conftest's
