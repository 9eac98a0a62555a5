"""Writing a run's incident record to a file: the one way `bringup record` and the console's key do it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui.config.deployments import DeploymentConfig
from tui.guard.files import out_path, private_dir, write_private
from tui.lifecycle.incident import incident, markdown, pick
from tui.lifecycle.presets import get_preset

from .history import HistoryStore, history_path


def record_path(state_dir: Path, deployment: str, invocation: str) -> Path:
    """Where a run's record goes by default: beside the history, one file per run (a rewrite replaces it)."""
    return state_dir / "deployments" / deployment / "records" / f"{invocation[:12]}.md"


def write_record(state_dir: Path, deployment: str, run: str = "", out: str = "",
                 note: Callable[[str], None] | None = None, dep: DeploymentConfig | None = None) \
        -> tuple[Path | None, dict[str, Any], str]:
    """The record of `run` (default: the latest that did not reach ready, else the latest) as (where it was
    written, the object, the Markdown). `out`: a file, `-` for nowhere (the caller prints it), "" for the default
    place (0600 in a 0700 directory: a record quotes the server's log). An `out` whose directory another user can
    write goes into a fresh private directory there (tui/guard/files.py `out_path`), and `note` is told so. Raises
    tui.lifecycle.incident.NoSuchRun, or OSError (UnsafeLocation among them) when it cannot be written."""
    store = HistoryStore(history_path(state_dir, deployment))
    runs = store.runs()
    for skipped in store.notes:  # a record that did not read back (not finite, not of its shape): said, not hidden
        if note is not None:
            note(skipped)
    chosen = pick(runs, deployment, run)
    # the deployment's preset and extra flags: the way back offered only as `restart` would take it
    preset = get_preset(dep.preset) if dep is not None else None
    d = incident(chosen, runs, preset, [f.spec() for f in dep.extra_flags] if dep is not None else (),
                 tuple(dep.hide_flags) if dep is not None else ())
    text = markdown(d)
    if out == "-":
        return None, d, text
    if out:
        where = out_path(out)
        if where.note and note is not None:
            note(where.note)
        path = where.path
    else:
        path = record_path(state_dir, deployment, chosen.invocation)
        private_dir(path.parent)  # bringup's own: one an older bringup left 0755 is tightened
    write_private(path, text)
    return path, d, text
