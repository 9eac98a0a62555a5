"""Writing a results directory as the sweep goes (the format is results.py's): records appended and flushed line by
line, sweep.json replaced atomically, the pointer that lets a console find a running sweep.

A console reads the directory while this writes it, and a sweep may be killed at any moment: a reader must never
see a half-written sweep.json (tmp + rename), and every record written before the kill must be on disk (one
flushed line each).

No secret is written: the command lines of sweep.json and of the configurations' records, their flags and the
failed configurations' logs go out with secrets' values as `***` (tui/lifecycle/secrets.py). A results directory
is shared and pasted; a resumed sweep takes the secrets back from the server's own command line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tui.guard.files import open_append, private_dir, write_private
from tui.guard.redact import scrub_obj
from tui.lifecycle.secrets import redact_argv, redact_flags, redact_text
from tui.sweep.results import (
    LOGS_DIR,
    PLAN_FILE,
    RECORDS_FILE,
    SWEEP_FILE,
    SweepMeta,
    config_log_path,
    pointer_path,
)


def write_atomic(path: Path, text: str) -> None:
    """Whole or not at all, on disk before it is seen, 0600 and through no link (tui/guard/files.py)."""
    write_private(path, text, durable=True)


class Recorder:
    """One results directory, written by one sweep process. `echo` sees every record too (`--json`, the text
    lines of the CLI)."""

    def __init__(self, results_dir: Path, echo: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.dir = results_dir
        self.echo = echo
        # 0700 where made, 0600 files, no link followed: a results directory quotes the server's logs. The caller
        # chose the directory (`sweep --out`: a private one in it when it is not safe, tui/guard/files.py out_dir)
        private_dir(self.dir / LOGS_DIR)
        self._records = open_append(self.dir / RECORDS_FILE)
        self.meta: SweepMeta | None = None

    def copy_plan(self, text: str) -> None:
        if not (self.dir / PLAN_FILE).exists():
            write_atomic(self.dir / PLAN_FILE, text)

    def write_meta(self, meta: SweepMeta) -> None:
        self.meta = meta
        shown = replace(meta, original_argv=tuple(redact_argv(meta.original_argv)))
        write_atomic(self.dir / SWEEP_FILE, json.dumps(shown.to_json(), indent=1) + "\n")

    def append(self, record: dict[str, Any]) -> None:
        record = scrub_obj(_redacted(record))  # a step's detail names flag changes: the book hides their values
        self._records.write(json.dumps(record, default=str) + "\n")
        self._records.flush()
        if self.echo is not None:
            self.echo(record)

    def write_log(self, config: str, lines: list[str]) -> Path:
        path = config_log_path(self.dir, config)
        with open_append(path) as f:
            f.write("\n".join(redact_text(ln) for ln in lines) + "\n")
        return path

    def close(self) -> None:
        self._records.close()


def _redacted(record: dict[str, Any]) -> dict[str, Any]:
    """A record with its command line and flags' secrets as `***` (a configuration's record has both)."""
    out = dict(record)
    if isinstance(out.get("argv"), list | tuple):
        out["argv"] = redact_argv([str(a) for a in out["argv"]])
    if isinstance(out.get("flags"), dict):
        out["flags"] = redact_flags(out["flags"])
    return out


def write_pointer(state_dir: Path, deployment: str, results_dir: Path) -> Path:
    path = pointer_path(state_dir, deployment)
    write_atomic(path, json.dumps({"dir": str(results_dir), "pid": os.getpid()}) + "\n")
    return path


def remove_pointer(state_dir: Path, deployment: str) -> None:
    """Only our own pointer: a second sweep's (refused by the lock, but still) is not ours to remove."""
    path = pointer_path(state_dir, deployment)
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass
