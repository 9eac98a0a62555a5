"""A sweep's results directory written by hand as the runner writes it (sweep.json and records.jsonl), read as it
grows: the seeds' DFlash sweep of four configurations, one failing with CUDA graphs, one cell invalidated by a
restart in the middle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui.sweep.live import LiveSweep
from tui.sweep.results import read_results

CONFIGS = ["budget=8,topk=4", "budget=16,topk=4", "budget=16,topk=8", "budget=32,topk=8,graphs"]
CELLS = [f"p{p}-o256-c{c}-r0" for p in (1024, 8192) for c in (1, 8, 32)]
FAILED = CONFIGS[3]
HINT = "DFlash drafts cannot be captured in CUDA graphs here: add --enforce-eager [or drop --cuda-graph-max-bs]"
EXCERPT = "[rank0]: RuntimeError: CUDA error: operation not permitted when stream is capturing"
RESTARTED = "server restarted during the cell (invocation changed)"
T0 = 1_700_000_000.0
GPUS = 8


def meta(d: Path, status: str = "running") -> None:
    d.mkdir(parents=True, exist_ok=True)
    raw = {"deployment": "k26", "host": "gpu-a", "started_at": T0, "original_argv": ["vllm", "serve", "k26"],
           "configs": CONFIGS, "cells": CELLS, "status": status, "pid": 4242,
           "finished_at": None if status == "running" else T0 + 4000}
    tmp = d / "sweep.json.tmp"
    tmp.write_text(json.dumps(raw))
    tmp.replace(d / "sweep.json")


def append(d: Path, *records: dict[str, Any]) -> None:
    with (d / "records.jsonl").open("a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def append_raw(d: Path, text: str) -> None:
    with (d / "records.jsonl").open("a") as f:
        f.write(text)


def steps(config: str, at: float) -> list[dict[str, Any]]:
    names = ("lock", "flags", "stop", "release", "start", "follow")
    return [{"type": "step", "config": config, "name": n, "status": "done", "detail": "", "at": at + i}
            for i, n in enumerate(names)]


def config(name: str, at: float, inv: str, failed: bool = False) -> dict[str, Any]:
    budget = name.split(",")[0].split("=")[1]
    return {"type": "config", "config": name, "at": at, "invocation": inv, "attempts": 1,
            "flags": {"speculative-config": f'{{"method": "dflash", "budget": [{budget}]}}', "enforce-eager": None},
            "argv": ["vllm", "serve", "k26"], "status": "failed" if failed else "ready",
            "failure": {"phase": "graph-capture", "kind": "cuda-graph", "excerpt": [EXCERPT], "hint": HINT}
            if failed else None,
            "gpu_mem_at_ready_mib": {} if failed else {str(g): 131_072 for g in range(GPUS)},
            "ready_s": None if failed else 412.0}


def tok_s(name: str, cell: str) -> float:
    """Made-up but shaped like the seeds' numbers: more concurrency, more tokens/s; longer prompts, fewer."""
    k = CONFIGS.index(name)
    p, c = int(cell[1:].split("-")[0]), int(cell.split("-c")[1].split("-")[0])
    return round(92.0 * c ** 0.8 * (1 + 0.07 * k) * (1.0 if p == 1024 else 0.62), 1)


def cell(name: str, cid: str, at: float, inv: str, valid: bool = True, reason: str = "",
         attempt: int = 1, **metrics: Any) -> dict[str, Any]:
    p, c = int(cid[1:].split("-")[0]), int(cid.split("-c")[1].split("-")[0])
    total = tok_s(name, cid)
    m = {"completed": 8 * c, "failed": 0, "duration_s": 38.0,
         "ttft_ms": {"mean": 210.0, "p50": 180.0, "p90": 420.0, "p99": 650.0},
         "tpot_ms": {"mean": 11.0, "p50": 10.5, "p90": 14.0, "p99": 19.0}, "itl_ms": {}, "e2el_ms": {},
         "tok_s_total": total, "tok_s_user": total / c, "tok_s_gpu": total / GPUS, "req_s": total / 256,
         "goodput_rps": None, "slo": None, "accept_len": 3.4, "accept_rate": 0.61}
    m.update(metrics)
    return {"type": "cell", "config": name, "cell": cid, "prompt_tokens": p, "output_tokens": 256,
            "concurrency": c, "repeat": 0, "valid": valid, "reason": reason, "attempt": attempt,
            "invocation": inv, "metrics": m, "at": at}


def full_sweep(d: Path) -> None:
    """The whole sweep, done: three configurations measured, the fourth failed in graph capture, one cell of the
    second invalid after a restart in the middle (its retry failed too)."""
    meta(d, "done")
    at = T0
    for k, name in enumerate(CONFIGS):
        append(d, *steps(name, at))
        at += 420
        if name == FAILED:
            append(d, config(name, at, f"inv{k}", failed=True))
            continue
        append(d, config(name, at, f"inv{k}"))
        for cid in CELLS:
            at += 40
            if k == 1 and cid == CELLS[4]:
                append(d, cell(name, cid, at, f"inv{k}", valid=False, reason=RESTARTED, attempt=2))
            else:
                append(d, cell(name, cid, at, f"inv{k}"))


def live_of(d: Path) -> LiveSweep:
    return LiveSweep.from_results(read_results(d))
