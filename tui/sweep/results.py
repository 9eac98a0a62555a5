"""The results directory of one sweep: its paths, its record format, and a reader.

A sweep writes as it goes and a console reads while it writes, so this module is the one place both agree on:
the file names, the shape of every record, and a reader that takes a directory mid-write (a half-written last line
of ``records.jsonl`` is ignored, not an error) and returns typed dataclasses. It imports only the standard
library: the runner, the CLI, the console view and the charts all use it.

Layout (``<state dir>/sweeps/<deployment>-<UTC timestamp>/``)::

    plan.toml       the plan, copied
    sweep.json      {"deployment", "host", "started_at", "original_argv", "configs", "cells", "status", "pid",
                     "finished_at", "keep"}, rewritten atomically (tmp + rename)
    records.jsonl   one JSON object per line, "type" = "step" | "config" | "cell" | "done"
    logs/NAME.log   the server log excerpt of every failed configuration
    summary.csv     one row per valid cell (written at the end and on interrupt)
    summary.md      configs x cells, tok/s total; best per cell and overall with its flags

A console on the same deployment finds a running sweep through ``<state dir>/deployments/<deployment>/sweep.json``
= {"dir", "pid"} (removed at the end).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.guard.numbers import MAX_COUNT, MAX_WHOLE, epoch, real, real_or_none, whole
from tui.guard.text import split_lines

PLAN_FILE = "plan.toml"
SWEEP_FILE = "sweep.json"
RECORDS_FILE = "records.jsonl"
LOGS_DIR = "logs"
SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
POINTER_FILE = "sweep.json"

#: sweep.json "status"
RUNNING, DONE, INTERRUPTED, FAILED = "running", "done", "interrupted", "failed"

#: the `config` of the steps that end a sweep (back to the original flags, or on to the best configuration with
#: `--keep best`): a step of the sweep, never a configuration of it
RESTORE = "(restore)"

STAT_KEYS = ("mean", "p50", "p90", "p99")
LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


# ---------------------------------------------------------------------------------------------------- paths


def cell_id(prompt_tokens: int, output_tokens: int, concurrency: int, repeat: int) -> str:
    """The one spelling of a cell's id: the key of resume, of the matrix view, and of summary rows."""
    return f"p{prompt_tokens}-o{output_tokens}-c{concurrency}-r{repeat}"


def sweeps_root(state_dir: Path) -> Path:
    return state_dir / "sweeps"


def utc_stamp(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def default_results_dir(state_dir: Path, deployment: str, now: float | None = None) -> Path:
    return sweeps_root(state_dir) / f"{deployment}-{utc_stamp(now)}"


def pointer_path(state_dir: Path, deployment: str) -> Path:
    """Where a running sweep announces its results directory to consoles of the same deployment."""
    return state_dir / "deployments" / deployment / POINTER_FILE


def config_log_path(results_dir: Path, config: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_.=," else "_" for c in config) or "_"
    return results_dir / LOGS_DIR / f"{safe}.log"


@dataclass(frozen=True, slots=True)
class Pointer:
    dir: Path
    pid: int


def read_pointer(state_dir: Path, deployment: str) -> Pointer | None:
    """The running sweep of this deployment, or None (no pointer, unreadable, or its process is gone)."""
    try:
        raw = json.loads(pointer_path(state_dir, deployment).read_text())
        ptr = Pointer(Path(raw["dir"]), whole(raw["pid"], "the sweep's pid", low=1))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return ptr if pid_alive(ptr.pid) else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class Stat:
    """mean and percentiles of one latency, in ms; None when no request gave a value."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None

    @classmethod
    def from_json(cls, raw: Any) -> Stat:
        raw = raw if isinstance(raw, dict) else {}
        return cls(*(_num(raw.get(k)) for k in STAT_KEYS))

    def to_json(self) -> dict[str, float | None]:
        return {k: getattr(self, k) for k in STAT_KEYS}


@dataclass(frozen=True, slots=True)
class CellMetrics:
    completed: int = 0
    failed: int = 0
    duration_s: float = 0.0
    ttft_ms: Stat = field(default_factory=Stat)
    tpot_ms: Stat = field(default_factory=Stat)
    itl_ms: Stat = field(default_factory=Stat)
    e2el_ms: Stat = field(default_factory=Stat)
    tok_s_total: float = 0.0
    tok_s_user: float | None = None
    tok_s_gpu: float | None = None
    req_s: float = 0.0
    goodput_rps: float | None = None
    slo: str | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    #: why accept_len is None although the server speculates (its /metrics has no counter to give it)
    accept_note: str | None = None

    @classmethod
    def from_json(cls, raw: Any) -> CellMetrics:
        raw = raw if isinstance(raw, dict) else {}
        return cls(
            completed=_count(raw, "completed"), failed=_count(raw, "failed"),
            duration_s=_amount(raw, "duration_s"),
            ttft_ms=Stat.from_json(raw.get("ttft_ms")), tpot_ms=Stat.from_json(raw.get("tpot_ms")),
            itl_ms=Stat.from_json(raw.get("itl_ms")), e2el_ms=Stat.from_json(raw.get("e2el_ms")),
            tok_s_total=_amount(raw, "tok_s_total"), tok_s_user=_num(raw.get("tok_s_user")),
            tok_s_gpu=_num(raw.get("tok_s_gpu")), req_s=_amount(raw, "req_s"),
            goodput_rps=_num(raw.get("goodput_rps")), slo=raw.get("slo"),
            accept_len=_num(raw.get("accept_len")), accept_rate=_num(raw.get("accept_rate")),
            accept_note=raw.get("accept_note") if isinstance(raw.get("accept_note"), str) else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"completed": self.completed, "failed": self.failed, "duration_s": self.duration_s}
        for k in LATENCY_METRICS:
            out[k] = getattr(self, k).to_json()
        out.update(tok_s_total=self.tok_s_total, tok_s_user=self.tok_s_user, tok_s_gpu=self.tok_s_gpu,
                   req_s=self.req_s, goodput_rps=self.goodput_rps, slo=self.slo, accept_len=self.accept_len,
                   accept_rate=self.accept_rate)
        if self.accept_note:
            out["accept_note"] = self.accept_note
        return out


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One restart step of one configuration (lock, flags, stop, release, start, follow, ...)."""

    config: str
    name: str
    status: str  # running | done | failed | skipped
    detail: str
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"type": "step", "config": self.config, "name": self.name, "status": self.status,
                "detail": self.detail, "at": self.at}


@dataclass(frozen=True, slots=True)
class FailureInfo:
    """The reducer's Failure of a configuration that did not reach ready."""

    phase: str
    kind: str
    excerpt: tuple[str, ...]
    hint: str

    @classmethod
    def from_json(cls, raw: Any) -> FailureInfo | None:
        if not isinstance(raw, dict):
            return None
        return cls(str(raw.get("phase", "")), str(raw.get("kind", "")),
                   tuple(str(x) for x in raw.get("excerpt") or ()), str(raw.get("hint", "")))

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "kind": self.kind, "excerpt": list(self.excerpt), "hint": self.hint}


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """The outcome of bringing one configuration up: ready (then its cells follow), failed or skipped."""

    config: str
    flags: dict[str, str | bool | None]  # value, true for a switch, None for an unset flag
    argv: tuple[str, ...]
    invocation: str | None
    status: str  # ready | failed | skipped
    attempts: int
    failure: FailureInfo | None
    gpu_mem_at_ready_mib: dict[str, float]
    ready_s: float | None
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"type": "config", "config": self.config, "flags": dict(self.flags), "argv": list(self.argv),
                "invocation": self.invocation, "status": self.status, "attempts": self.attempts,
                "failure": self.failure.to_json() if self.failure else None,
                "gpu_mem_at_ready_mib": dict(self.gpu_mem_at_ready_mib), "ready_s": self.ready_s, "at": self.at}


@dataclass(frozen=True, slots=True)
class CellRecord:
    config: str
    cell: str
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    repeat: int
    valid: bool
    reason: str
    attempt: int
    invocation: str | None
    metrics: CellMetrics
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"type": "cell", "config": self.config, "cell": self.cell, "prompt_tokens": self.prompt_tokens,
                "output_tokens": self.output_tokens, "concurrency": self.concurrency, "repeat": self.repeat,
                "valid": self.valid, "reason": self.reason, "attempt": self.attempt, "invocation": self.invocation,
                "metrics": self.metrics.to_json(), "at": self.at}


@dataclass(frozen=True, slots=True)
class SweepMeta:
    """sweep.json: what the sweep is and where it stands."""

    deployment: str
    host: str
    started_at: float
    original_argv: tuple[str, ...]
    configs: tuple[str, ...]
    cells: tuple[str, ...]
    status: str  # running | done | interrupted | failed
    pid: int
    finished_at: float | None = None
    #: what the sweep ends on: "original" (its flags restored) or "best" (`--keep best`); "" in older results
    keep: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "host": self.host, "started_at": self.started_at,
                "original_argv": list(self.original_argv), "configs": list(self.configs),
                "cells": list(self.cells), "status": self.status, "pid": self.pid, "finished_at": self.finished_at,
                "keep": self.keep}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SweepMeta:
        return cls(deployment=str(raw.get("deployment", "")), host=str(raw.get("host", "")),
                   started_at=_moment(raw, "started_at"),
                   original_argv=tuple(str(a) for a in raw.get("original_argv") or ()),
                   configs=tuple(str(c) for c in raw.get("configs") or ()),
                   cells=tuple(str(c) for c in raw.get("cells") or ()), status=str(raw.get("status", "")),
                   pid=_count(raw, "pid"), finished_at=_num(raw.get("finished_at")),
                   keep=str(raw.get("keep") or ""))


@dataclass(frozen=True, slots=True)
class SweepResults:
    """Everything in a results directory, in file order. Later records of the same config/cell supersede earlier
    ones (a retry, a resumed sweep); `config_status` and `cell` give the latest."""

    dir: Path
    meta: SweepMeta | None
    steps: tuple[StepRecord, ...]
    configs: tuple[ConfigRecord, ...]
    cells: tuple[CellRecord, ...]
    done: dict[str, Any] | None
    #: what could not be read, one line each (a record with a number that is none, a sweep.json that is not one):
    #: skipped, never a crash, and said by whoever shows the results
    notes: tuple[str, ...] = ()

    def config_record(self, config: str) -> ConfigRecord | None:
        found = [c for c in self.configs if c.config == config]
        return found[-1] if found else None

    def cell(self, config: str, cell: str) -> CellRecord | None:
        """The valid record of this cell if any, else its latest record."""
        found = [c for c in self.cells if c.config == config and c.cell == cell]
        valid = [c for c in found if c.valid]
        return valid[-1] if valid else (found[-1] if found else None)

    def valid_cells(self) -> list[CellRecord]:
        """One record per configuration and cell, the latest valid one (as `cell` gives, and the live view shows:
        a cell measured again after its configuration's flags changed in a resumed plan is the later one)."""
        seen: dict[tuple[str, str], CellRecord] = {}
        for c in self.cells:
            if c.valid:
                seen[(c.config, c.cell)] = c
        return list(seen.values())


def read_results(results_dir: Path | str) -> SweepResults:
    """Read a results directory, finished or still being written. Unknown record types and a torn last line are
    skipped; a missing sweep.json gives meta None."""
    d = Path(results_dir)
    meta: SweepMeta | None = None
    notes: list[str] = []
    try:
        meta = SweepMeta.from_json(json.loads((d / SWEEP_FILE).read_text()))
    except OSError:
        meta = None
    except (ValueError, TypeError, AttributeError) as e:
        meta = None
        notes.append(f"{SWEEP_FILE} skipped: {e}"[:200])
    steps: list[StepRecord] = []
    configs: list[ConfigRecord] = []
    cells: list[CellRecord] = []
    done: dict[str, Any] | None = None
    for i, raw in enumerate(iter_records(d / RECORDS_FILE)):
        rec = parse_record(raw, notes.append, i + 1)
        if isinstance(rec, StepRecord):
            steps.append(rec)
        elif isinstance(rec, ConfigRecord):
            configs.append(rec)
        elif isinstance(rec, CellRecord):
            cells.append(rec)
        elif rec is not None:
            done = rec
    return SweepResults(d, meta, tuple(steps), tuple(configs), tuple(cells), done, tuple(notes))


def parse_record(raw: dict[str, Any], note: Callable[[str], object] | None = None,
                 line: int = 0) -> StepRecord | ConfigRecord | CellRecord | dict[str, Any] | None:
    """One line of records.jsonl as its record (the closing `done` record as it was written); None for a type this
    reader does not know or a malformed line: the runner may be newer than the reader, and one bad line must not
    hide the others. A record of a known type that cannot be read (a number that is none: `inf`, `true`, text;
    tui/guard/numbers.py) is told to `note`, one line."""
    kind = raw.get("type")
    try:
        if kind == "step":
            return parse_step(raw)
        if kind == "config":
            return parse_config(raw)
        if kind == "cell":
            return parse_cell(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        if note is not None:
            why = f"no {e}" if isinstance(e, KeyError) else str(e) or type(e).__name__
            note(f"{RECORDS_FILE} line {line} ({kind}) skipped: {why}"[:200])
        return None
    return raw if kind == "done" else None


def iter_records(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for line in split_lines(text):
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if isinstance(obj, dict):
            out.append(obj)
    return out


def parse_step(raw: dict[str, Any]) -> StepRecord:
    return StepRecord(str(raw["config"]), str(raw["name"]), str(raw["status"]), str(raw.get("detail", "")),
                      _moment(raw, "at"))


def parse_config(raw: dict[str, Any]) -> ConfigRecord:
    return ConfigRecord(
        config=str(raw["config"]), flags=dict(raw.get("flags") or {}),
        argv=tuple(str(a) for a in raw.get("argv") or ()), invocation=raw.get("invocation"),
        status=str(raw["status"]), attempts=_count(raw, "attempts"),
        failure=FailureInfo.from_json(raw.get("failure")),
        gpu_mem_at_ready_mib={str(k): real(v, f"GPU {str(k)[:8]}'s memory", low=0.0, high=MAX_COUNT)
                              for k, v in (raw.get("gpu_mem_at_ready_mib") or {}).items()},
        ready_s=_num(raw.get("ready_s")), at=_moment(raw, "at"))


def parse_cell(raw: dict[str, Any]) -> CellRecord:
    return CellRecord(
        config=str(raw["config"]), cell=str(raw["cell"]), prompt_tokens=_count(raw, "prompt_tokens", None),
        output_tokens=_count(raw, "output_tokens", None), concurrency=_count(raw, "concurrency", None),
        repeat=_count(raw, "repeat", None), valid=bool(raw["valid"]), reason=str(raw.get("reason", "")),
        attempt=_count(raw, "attempt", 1), invocation=raw.get("invocation"),
        metrics=CellMetrics.from_json(raw.get("metrics")), at=_moment(raw, "at"))


# The numbers of a record: this program wrote them, but the file is outside it by the time it is read (a hand edit,
# a newer or broken writer, another user's planted file), so they are taken as every number from outside is
# (tui/guard/numbers.py): finite, in range, never a bool or text. A required one that is none makes its record
# skipped with a note (`read_results`); an optional one is absent.


def _count(raw: dict[str, Any], key: str, default: int | None = 0) -> int:
    """A count: a whole number from 0; `default` where the key is missing or null (None: the key is required)."""
    v = raw.get(key) if default is not None else raw[key]
    return default if v is None and default is not None else whole(v, key, low=0, high=MAX_WHOLE)


def _amount(raw: dict[str, Any], key: str) -> float:
    """A measured amount (seconds, tokens a second): finite, from 0; 0 where missing or null."""
    v = raw.get(key)
    return 0.0 if v is None else real(v, key, low=0.0, high=MAX_COUNT)


def _moment(raw: dict[str, Any], key: str) -> float:
    """A moment (`at`, `started_at`): an epoch between 1970 and 2200; 0 where missing or null."""
    v = raw.get(key)
    return 0.0 if v is None else epoch(v, key)


def _num(v: Any) -> float | None:
    """An optional measurement: None where it is absent or is no finite number."""
    return real_or_none(v)
