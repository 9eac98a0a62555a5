"""The console's incident record: on a failed run it offers the record once (a notice naming the key), and the key
writes it (tui/engine/incident_file.py: the same file as `bringup record`) and says where. Plain functions the app's
action and update handler call, so the record's wording and its file live in one place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tui.config.deployments import DeploymentConfig
from tui.engine.incident_file import write_record
from tui.lifecycle.incident import NoSuchRun, record_command
from tui.model import Phase, Snapshot


@dataclass(frozen=True, slots=True)
class Notice:
    """What the console says, and how loudly."""

    text: str
    severity: Literal["information", "warning", "error"] = "information"


def record_offer(before: Snapshot, snap: Snapshot, *, live: bool, key: str) -> Notice | None:
    """A run seen failing (not one already failed when the console opened): the record is offered, once. `key`
    "": the console may not write it (read-only): the command that does is named instead."""
    if not live or snap.phase != Phase.FAILED or before.phase in (Phase.FAILED, Phase.UNKNOWN):
        return None
    command = record_command(snap.deployment, snap.invocation)
    if not key:
        return Notice(f"{snap.deployment} failed: `{command}` writes its incident record")
    return Notice(f"{snap.deployment} failed: {key} writes its incident record ({command})")


def write_incident_record(state_dir: Path, deployment: str, snap: Snapshot,
                          dep: DeploymentConfig | None = None) -> Notice:
    """The failed run's record (else the latest run's), written where `bringup record` writes it (its way back
    read with `dep`'s flags, as `bringup record` reads it)."""
    run = snap.invocation if snap.phase == Phase.FAILED else ""
    try:
        path, _, _ = write_record(state_dir, deployment, run, dep=dep)
    except NoSuchRun as e:
        return Notice(str(e), "warning")
    except OSError as e:
        return Notice(f"record: {e.strerror or e}", "error")
    return Notice("incident record written:\n" + "\n".join(path_lines(str(path))))


#: the characters a line of a toast holds at its narrowest: the console at 80 columns, where the toasts keep to
#: the right half, less their bar and padding (app.tcss; tests/console/test_failure_toast_narrow.py reads it off
#: the screen)
TOAST_TEXT_WIDTH = 36


def path_lines(path: str, width: int = TOAST_TEXT_WIDTH) -> list[str]:
    """A path in lines of at most `width`, broken only after a `/`: the toast wrapped it wherever its line ended,
    breaking the record's file name mid-name (issue 51), and a path broken so cannot be copied as it is. A single
    name longer than `width` stays whole on a line of its own."""
    lines: list[str] = []
    line = ""
    for part in path.split("/")[:-1]:
        piece = part + "/"
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    name = path.rsplit("/", 1)[-1]
    if line and len(line) + len(name) > width:
        lines.append(line)
        line = ""
    lines.append(line + name)
    return lines
