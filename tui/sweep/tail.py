"""Following a results directory while the runner writes it: the appended bytes of records.jsonl and sweep.json
when it was rewritten, nothing else.

The console polls every second for as long as a sweep runs (hours), so a poll that finds nothing new must cost
next to nothing: two `stat`s, no read, no parse, and `poll()` says False so the view does not redraw. The parsing
and folding are pure (tui/sweep/live.py); this is the I/O around them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tui.sweep.live import LineBuffer, LiveSweep
from tui.sweep.results import RECORDS_FILE, SWEEP_FILE, SweepMeta, read_pointer, sweeps_root

#: the most bytes one poll reads (a view opened on a long sweep catches up over a few polls, never in one long read)
READ_MAX = 4 << 20


class SweepTail:
    """One results directory, followed: `poll()` folds what was appended since the last poll into `state`."""

    def __init__(self, results_dir: Path | str) -> None:
        self.dir = Path(results_dir)
        self.state = LiveSweep()
        self._buf = LineBuffer()
        self._offset = 0
        self._meta_key: tuple[int, int] | None = None

    def poll(self) -> bool:
        """Whether anything the view shows changed."""
        before = self.state.version
        self._poll_meta()
        self._poll_records()
        return self.state.version != before

    def _poll_meta(self) -> None:
        path = self.dir / SWEEP_FILE
        try:
            st = path.stat()
        except OSError:
            return
        key = (st.st_mtime_ns, st.st_size)
        if key == self._meta_key:
            return
        try:
            raw = json.loads(path.read_text())
            meta = SweepMeta.from_json(raw) if isinstance(raw, dict) else None
        except (OSError, ValueError, TypeError):
            return  # rewritten atomically, so this is a foreign file: try again at the next change
        self._meta_key = key
        self.state.set_meta(meta)

    def _poll_records(self) -> None:
        path = self.dir / RECORDS_FILE
        try:
            size = path.stat().st_size
        except OSError:
            return
        if size < self._offset:  # rewritten from scratch: read it again, into a fresh state
            self._offset = 0
            self._buf.reset()
            meta = self.state.meta
            self.state = LiveSweep(meta=meta, version=self.state.version + 1)
        if size == self._offset:
            return
        try:
            with path.open("rb") as f:
                f.seek(self._offset)
                data = f.read(min(size - self._offset, READ_MAX))
        except OSError:
            return
        self._offset += len(data)
        self.state.apply_all(self._buf.feed(data))


def running_sweep(state_dir: Path, deployment: str) -> Path | None:
    """The results directory of the sweep running on this deployment now, or None: the pointer the runner writes
    names it and its pid, and the runner's process must still be alive (a sweep killed with SIGKILL leaves its
    pointer behind), and its directory must exist."""
    ptr = read_pointer(state_dir, deployment)
    if ptr is None or not ptr.dir.is_dir():
        return None
    return ptr.dir


def latest_sweep(state_dir: Path, deployment: str) -> Path | None:
    """The newest results directory of this deployment's sweeps (running or not), by the UTC stamp in its name:
    what the console's sweep key opens when no sweep runs."""
    pattern = re.compile(rf"^{re.escape(deployment)}-\d{{8}}T\d{{6}}Z$")
    try:
        found = [p for p in sweeps_root(state_dir).iterdir() if pattern.match(p.name) and p.is_dir()]
    except OSError:
        return None
    return max(found, key=lambda p: p.name) if found else None
