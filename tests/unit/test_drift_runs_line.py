"""The config-drift note's `runs:` line is the command that runs (issue 51, finding 6): a restart with its own
change over an edited config used to print `runs: ... --disable-cuda-graph` and, on the next line, `-
--disable-cuda-graph`; the note named the reconciled command before the restart's change, not what ran."""

from __future__ import annotations

from tui.lifecycle.flags import FlagChange, apply_changes
from tui.lifecycle.presets import get_preset
from tui.ops.config_drift import reconcile

SPECS = get_preset("sglang").flags
BASE = ["python", "-m", "sglang.launch_server", "--tp-size", "2"]
SAVED = [*BASE, "--disable-cuda-graph"]
CONFIG = ["python", "-m", "sglang.launch_server", "--tp-size", "4"]


def _runs(lines: tuple[str, ...]) -> str:
    return next(line for line in lines if line.startswith("runs:"))


def test_the_runs_line_names_the_command_with_the_restarts_change_made() -> None:
    drift = reconcile(CONFIG, BASE, SAVED, SPECS)
    assert drift is not None and "--disable-cuda-graph" in drift.run  # the saved change, replayed
    restart_runs = apply_changes(list(drift.run), [FlagChange("disable-cuda-graph", None, remove=True)], SPECS)
    said = drift.running(restart_runs).lines
    assert "--disable-cuda-graph" not in _runs(said), said
    assert "--tp-size 4" in _runs(said), said


def test_without_a_change_of_its_own_the_runs_line_is_the_reconciled_command() -> None:
    drift = reconcile(CONFIG, BASE, SAVED, SPECS)
    assert drift is not None
    assert _runs(drift.lines).endswith("--tp-size 4 --disable-cuda-graph"), drift.lines
    assert _runs(drift.running(drift.run).lines) == _runs(drift.lines)
