"""Parsers and the release rule on outputs captured on a real NVIDIA H200 (benchmarks/gpu_h200.py)."""

from __future__ import annotations

from pathlib import Path

from tui.collectors.gpu_smi import QUERY_FIELDS, parse_apps_csv, parse_gpu_csv
from tui.lifecycle.release import release_status
from tui.model import GpuSnapshot

D = Path(__file__).parents[1] / "fixtures" / "gpu_h200"


def load(name: str) -> str:
    text = (D / name).read_text()
    assert text.startswith("# source: real NVIDIA H200")
    return text


def snapshot(tag: str) -> GpuSnapshot:
    gpus = parse_gpu_csv(load(f"query_gpu_{tag}.csv"), QUERY_FIELDS)
    apps = parse_apps_csv(load(f"compute_apps_{tag}.csv"), {g.uuid: g.index for g in gpus})
    return GpuSnapshot(at=0.0, gpus=tuple(gpus), processes=tuple(apps))


def test_idle_h200_row() -> None:
    s = snapshot("idle")
    (g,) = s.gpus
    assert (g.index, g.name, g.mem_used_mib, g.mem_total_mib, g.util_pct) == (0, "NVIDIA H200", 0.0, 143771.0, 0.0)
    assert g.power_limit_w == 700.0 and g.sm_clock_mhz == 345.0
    assert s.processes == ()  # nvidia-smi prints nothing at all when no process runs


def test_loaded_h200_row_and_process() -> None:
    s = snapshot("loaded")
    (g,) = s.gpus
    assert g.mem_used_mib == 103373.0 and g.util_pct == 99.0 and g.power_w == 629.84
    (p,) = s.processes
    assert (p.pid, p.used_mib, p.gpu_index) == (457, 103364.0, 0)


def test_units_format_is_parsed_too() -> None:
    fields = ("index", "memory.used", "memory.total", "utilization.gpu", "power.draw")
    (g,) = parse_gpu_csv(load("query_gpu_loaded_units.csv"), fields)  # the header row is skipped, units stripped
    assert (g.mem_used_mib, g.mem_total_mib, g.util_pct, g.power_w) == (103373.0, 143771.0, 99.0, 629.84)


def test_release_rule_on_real_readings() -> None:
    baseline = {0: 0.0}
    held = release_status(snapshot("loaded"), [0], {457}, baseline, 1024.0)
    assert not held.released and held.holders == (457,) and held.held_mib[0] > 100_000
    assert "GiB held on GPU 0 by PID 457" in held.describe()
    assert release_status(snapshot("idle"), [0], {457}, baseline, 1024.0).released


def test_attribution_on_real_readings() -> None:
    from tui.lifecycle.release import attribute

    s = snapshot("loaded")
    mine = attribute(s, [0], current={457, 458}, previous=set(), running=True)
    assert (mine.current_mib, mine.previous_mib, mine.other_mib, mine.note) == (103364.0, 0.0, 0.0, "")
    old = attribute(s, [0], current={900}, previous={457}, running=True)
    assert old.previous_mib == 103364.0 and old.previous_gpus == (0,)
    foreign = attribute(s, [0], current={900}, previous=set(), running=True)
    assert foreign.other_mib == 103364.0 and "PID namespace" in foreign.note  # e.g. bringup in a container
    unknown = attribute(s, [0], current=None, previous=set(), running=True)
    assert "not attributed" in unknown.note
    # the process list lags the memory figures: a GPU already back to (near) nothing is not the old run's
    from dataclasses import replace

    freed = replace(s, gpus=tuple(replace(g, mem_used_mib=0.0) for g in s.gpus))
    gone = attribute(freed, [0], current={900}, previous={457}, running=True)
    assert gone.previous_mib == 0.0 and gone.previous_gpus == ()
