"""Writing a run's incident record to a file: the one way `bringup record` and the console's key do it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tui.lifecycle.incident import incident, markdown, pick

from .history import HistoryStore, history_path


def record_path(state_dir: Path, deployment: str, invocation: str) -> Path:
    """Where a run's record goes by default: beside the history, one file per run (a rewrite replaces it)."""
    return state_dir / "deployments" / deployment / "records" / f"{invocation[:12]}.md"


def write_record(state_dir: Path, deployment: str, run: str = "", out: str = ""
                 ) -> tuple[Path | None, dict[str, Any], str]:
    """The record of `run` (default: the latest that did not reach ready, else the latest) as (where it was
    written, the object, the Markdown). `out`: a file, `-` for nowhere (the caller prints it), "" for the default
    place. Raises tui.lifecycle.incident.NoSuchRun, or OSError when it cannot be written."""
    runs = HistoryStore(history_path(state_dir, deployment)).runs()
    chosen = pick(runs, deployment, run)
    d = incident(chosen, runs)
    text = markdown(d)
    if out == "-":
        return None, d, text
    path = Path(out).expanduser() if out else record_path(state_dir, deployment, chosen.invocation)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path, d, text
