"""A sweep as it is being written: its records folded, one at a time, into the state the sweep view draws.

The console polls a results directory every second while the runner appends to it, so the fold is incremental
(`LiveSweep.apply`) and the reading is of appended bytes only (`LineBuffer` here, the file in tui/sweep/tail.py):
a poll that finds nothing new costs one `stat` and redraws nothing. The record format and its parsers are the
runner's (tui/sweep/results.py); this module adds what a live view needs on top: which record is the latest of
each configuration and cell, which configuration is being worked on, and a counter that says whether anything
changed. Pure: no file, no clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tui.sweep.results import (
    RESTORE,
    RUNNING,
    CellRecord,
    ConfigRecord,
    StepRecord,
    SweepMeta,
    SweepResults,
    parse_record,
)


@dataclass
class LiveSweep:
    """The latest of everything, by configuration and cell. `version` grows with every record that changed
    something the view shows, and `cells_version` with every cell record (the charts depend on those only)."""

    meta: SweepMeta | None = None
    configs: dict[str, ConfigRecord] = field(default_factory=dict)
    cells: dict[tuple[str, str], CellRecord] = field(default_factory=dict)
    #: each configuration's steps, by step name, the latest status of each, in the order they first came
    steps: dict[str, dict[str, StepRecord]] = field(default_factory=dict)
    #: the configuration of the latest step, config or cell record: the one being brought up or measured
    current: str | None = None
    #: configurations and cells seen in records but not (yet) in sweep.json, in the order they came
    extra_configs: list[str] = field(default_factory=list)
    extra_cells: list[str] = field(default_factory=list)
    done: dict[str, Any] | None = None
    version: int = 0
    cells_version: int = 0

    # ------------------------------------------------------------------ folding

    def set_meta(self, meta: SweepMeta | None) -> None:
        if meta != self.meta:
            self.meta = meta
            self.version += 1

    def apply(self, raw: dict[str, Any]) -> bool:
        """Fold one record; whether it was one (a record of an unknown type or shape is skipped, never fatal:
        the runner may be newer than this view)."""
        rec = parse_record(raw)
        if isinstance(rec, StepRecord):
            self._step(rec)
        elif isinstance(rec, ConfigRecord):
            self._config(rec)
        elif isinstance(rec, CellRecord):
            self._cell(rec)
        elif rec is not None:
            self.done = rec
        else:
            return False
        self.version += 1
        return True

    def apply_all(self, records: list[dict[str, Any]]) -> int:
        return sum(self.apply(r) for r in records)

    def _seen(self, config: str) -> None:
        self.current = config
        if config == RESTORE:  # the sweep's last step, not one of its configurations: see `end_steps`
            return
        # a resumed sweep works on its configurations again: an earlier run's restore is not this run's end
        self.steps.pop(RESTORE, None)
        if config not in self.config_order and config not in self.extra_configs:
            self.extra_configs.append(config)

    def _step(self, s: StepRecord) -> None:
        self._seen(s.config)
        self.steps.setdefault(s.config, {})[s.name] = s

    def _config(self, c: ConfigRecord) -> None:
        self._seen(c.config)
        self.configs[c.config] = c

    def _cell(self, c: CellRecord) -> None:
        """A later record supersedes an earlier one (a retry), except that a valid result is never replaced by an
        invalid one (the reader of results.py keeps the valid one too: the view and the summary agree)."""
        self._seen(c.config)
        if c.cell not in self.cell_order and c.cell not in self.extra_cells:
            self.extra_cells.append(c.cell)
        old = self.cells.get((c.config, c.cell))
        if old is None or c.valid or not old.valid:
            self.cells[(c.config, c.cell)] = c
            self.cells_version += 1

    # ------------------------------------------------------------------ reading it

    @property
    def config_order(self) -> tuple[str, ...]:
        return self.meta.configs if self.meta is not None else ()

    @property
    def cell_order(self) -> tuple[str, ...]:
        return self.meta.cells if self.meta is not None else ()

    def end_steps(self) -> dict[str, StepRecord]:
        """The steps that end the sweep (restore the original flags, or keep the best configuration), by name."""
        return self.steps.get(RESTORE, {})

    def all_configs(self) -> list[str]:
        return [*self.config_order, *(c for c in self.extra_configs if c not in self.config_order)]

    def all_cells(self) -> list[str]:
        return [*self.cell_order, *(c for c in self.extra_cells if c not in self.cell_order)]

    @property
    def running(self) -> bool:
        """Whether the runner is still at work (as sweep.json says: a dead runner's says running too, which the
        console checks against its pid before it opens the view on its own)."""
        return self.meta is not None and self.meta.status == RUNNING

    @classmethod
    def from_results(cls, results: SweepResults) -> LiveSweep:
        """The same state from a directory read whole (`bringup sweep report DIR`): the records in time order."""
        live = cls(meta=results.meta)
        records: list[tuple[float, int, dict[str, Any]]] = []
        records += [(r.at, len(records) + i, r.to_json()) for i, r in enumerate(results.steps)]
        records += [(r.at, len(records) + i, r.to_json()) for i, r in enumerate(results.configs)]
        records += [(r.at, len(records) + i, r.to_json()) for i, r in enumerate(results.cells)]
        for _, _, raw in sorted(records, key=lambda t: (t[0], t[1])):
            live.apply(raw)
        live.done = results.done
        return live


class LineBuffer:
    """Complete JSON lines out of appended bytes. A trailing line without its newline is being written: it is kept
    until its newline comes (a line cut in the middle of a UTF-8 character too). A line that is not a JSON object
    is skipped."""

    def __init__(self) -> None:
        self._partial = b""
        self.skipped = 0

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        if not data:
            return []
        buf = self._partial + data
        *lines, self._partial = buf.split(b"\n")
        out: list[dict[str, Any]] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:  # includes a UnicodeDecodeError
                self.skipped += 1
                continue
            if isinstance(obj, dict):
                out.append(obj)
            else:
                self.skipped += 1
        return out

    def reset(self) -> None:
        self._partial = b""
