"""A sweep's results directory written as the runner writes it (tui/sweep): the metrics by `cell_metrics` from
request timings, each record by its dataclass's `to_json`, appended by the Recorder, read back by `read_results`;
and what a sweep's words must never say (a count of one in the plural)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from tui.lifecycle.presets import get_preset
from tui.sweep.metrics import RequestTiming, cell_metrics
from tui.sweep.recorder import Recorder
from tui.sweep.results import CellRecord, ConfigRecord, StepRecord, SweepMeta, read_results
from tui.sweep.summary import summary_md

SPECS = get_preset("sglang").flags
T0 = 1_700_000_000.0
RESTORE = "(restore)"  # the `config` of the runner's last steps, as records.jsonl spells it
RESTART_STEPS = ("lock", "flags", "stop", "release", "start", "follow")

#: the per-request TPOTs (seconds) of a cell: p50 33.5 ms, p90 36.6 ms, a spread of 9.3 %
TPOTS = (0.030, 0.031, 0.032, 0.033, 0.034, 0.035, 0.036, 0.038)


# ------------------------------------------------------------------------------------------------ the records


def timings(tpots: tuple[float, ...] = TPOTS, tokens: int = 64, per_chunk: int = 1) -> list[RequestTiming]:
    """One request per TPOT: first chunk at 0.1 s, then a chunk every `per_chunk` tokens (speculative decoding
    streams the tokens a step accepted in one chunk), the stream ending with its last chunk."""
    out = []
    for t in tpots:
        chunks = (tokens - 1) // per_chunk + 1
        at = tuple(0.1 + k * per_chunk * t for k in range(chunks))
        out.append(RequestTiming(True, at, output_tokens=per_chunk * (chunks - 1) + 1, end_s=at[-1]))
    return out


def measured(tok_s: float, tpots: tuple[float, ...] = TPOTS, per_chunk: int = 1) -> CellRecord:
    """A cell's metrics as the runner computes them, its wall time chosen to give `tok_s` output tokens/s."""
    reqs = timings(tpots, per_chunk=per_chunk)
    return CellRecord("", "", 0, 0, 0, 0, True, "", 1, None,
                      cell_metrics(reqs, sum(r.output_tokens for r in reqs) / tok_s, 8), 0.0)


class Sweep:
    """A results directory written through the runner's Recorder."""

    def __init__(self, d: Path, configs: list[str], cells: list[str], keep: str = "original") -> None:
        self.rec = Recorder(d)
        self.dir, self.configs, self.cells, self.keep = d, configs, cells, keep
        self.at = T0
        self.meta("running")

    def meta(self, status: str) -> None:
        self.rec.write_meta(SweepMeta("k26", "gpu-a", T0, ("sglang", "serve"), tuple(self.configs),
                                      tuple(self.cells), status, 4242, None if status == "running" else self.at,
                                      keep=self.keep))

    def step(self, config: str, name: str, status: str = "done", detail: str = "") -> None:
        self.at += 1
        self.rec.append(StepRecord(config, name, status, detail, self.at).to_json())

    def config(self, name: str, flags: dict[str, str | bool | None] | None = None) -> None:
        for s in RESTART_STEPS:
            self.step(name, s)
        self.at += 1
        self.rec.append(ConfigRecord(name, flags or {}, ("sglang", "serve"), f"inv-{name}", "ready", 1, None, {},
                                     300.0, self.at).to_json())

    def cell(self, config: str, cid: str, tok_s: float, tpots: tuple[float, ...] = TPOTS,
             per_chunk: int = 1) -> None:
        p, o, c, r = (int(x) for x in re.findall(r"\d+", cid))
        self.at += 40
        m = measured(tok_s, tpots, per_chunk).metrics
        self.rec.append(CellRecord(config, cid, p, o, c, r, True, "", 1, f"inv-{config}", m, self.at).to_json())

    def restore(self, status: str = "done", detail: str = "original flags: ready") -> None:
        self.step(RESTORE, "restore", "running", "putting the deployment back on the original flags")
        for s in RESTART_STEPS:
            self.step(RESTORE, s)
        self.step(RESTORE, "restore", status, detail)


def summary_of(d: Path) -> str:
    return summary_md(read_results(d))


CONFIGS = ["budget=8", "budget=16", "budget=32"]
#: a plan's matrix of one prompt and output length, at concurrency 1 and 8
MATRIX = "[matrix]\nprompt_tokens = [128]\noutput_tokens = [64]\nconcurrency = [1, 8]\n"

BAD = ("1 configurations", "1 cells", "1 requests", "1 attempts", "1 tokens", "1 nodes", "1 bring-ups",
       "1 valid cells", "1 new tokens", "1 warmup requests", "(s)")


def clean(text: str) -> None:
    for bad in BAD:
        assert bad not in text, (bad, text)


# ------------------------------------------------------------------ records with a number that is none in them

#: when the planted records say they were written
NOW = 1_780_000_000.0


def cell(metrics: dict[str, Any], **over: Any) -> dict[str, Any]:
    rec = {"type": "cell", "config": "base", "cell": "p128-o64-c1-r0", "prompt_tokens": 128, "output_tokens": 64,
           "concurrency": 1, "repeat": 0, "valid": True, "reason": "", "attempt": 1, "invocation": "inv1",
           "metrics": {"completed": 4, "failed": 0, "duration_s": 2.0, "tok_s_total": 128.0, "req_s": 2.0,
                       **metrics}, "at": NOW}
    rec.update(over)
    return rec


BAD_CELLS = [
    cell({"completed": math.inf}),  # json.dumps writes Infinity: int(inf) raised OverflowError, uncaught
    cell({"duration_s": "nan"}),
    cell({"tok_s_total": "inf"}),
    cell({"req_s": True}),
    cell({"completed": 1e308}),
    cell({}, concurrency="1_0"),
    cell({}, at="-inf"),
]


def write_results(d: Path, records: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> Path:
    d.mkdir()
    (d / "sweep.json").write_text(json.dumps(meta or {"deployment": "sim", "started_at": NOW, "pid": 1,
                                                      "configs": ["base"], "cells": ["p128-o64-c1-r0"],
                                                      "status": "done"}))
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return d
