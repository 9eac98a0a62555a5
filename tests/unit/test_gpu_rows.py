"""The GPU panel's rows as functions of a GPU snapshot (widgets/gpus.py): columns and headers, memory in GiB, the
deployment's GPUs marked, the memory budget from the server's flags, warnings only where wrong, rows that fit their
width with no value cut, a lost GPU and missing values. The panel drawn in the console: tests/console/
test_gpu_panel.py."""

from __future__ import annotations

import dataclasses

import pytest

from tests.helpers import console_states as cs
from tests.helpers.gpu_snapshots import ALL, text
from tui.model import GpuSample, GpuSnapshot
from widgets.gpus import LEGEND, MARK, Row, columns, memory_budget, memory_level, rows_for


def styles(row: Row) -> set[str]:
    return {s for _, s in row}


def gpu_rows(rows: list[Row]) -> list[Row]:
    return [r for r in rows if text(r).startswith((MARK, "  ", " "))]


def snap_at(frac: float, **changes: float) -> GpuSnapshot:
    """Eight H200s with `frac` of their memory used."""
    s = cs.gpus(128.4, 68)
    return dataclasses.replace(s, gpus=tuple(dataclasses.replace(g, mem_used_mib=frac * 143771, **changes)
                                             for g in s.gpus))


def test_columns_have_a_header_and_memory_is_in_gib() -> None:
    rows = rows_for(cs.gpus(128.4, 68), cs.history(128.4), ALL, 106324, False, 106, None, 0.9)
    header = text(rows[0])
    for label in ("GPU", "memory", "util", "temp", "power", "history"):
        assert label in header, header
    assert styles(rows[0]) == {"dim"}
    first = text(rows[1])
    assert "128.4/140 GiB" in first and "140G" not in first, first
    # each label sits over its column: the util figure ends where "util" does, the power figure where "power" does
    assert first.index("%") + 1 == header.index("util") + 4
    assert first.index(" W") + 2 == header.index("power") + 5


def test_the_deployments_gpus_are_marked_and_the_legend_says_so() -> None:
    rows = rows_for(cs.gpus(128.4, 68), {}, [0, 1, 2, 3], 106324, False, 80)
    marked = [text(r) for r in rows if text(r).startswith(MARK)]
    assert [t.split()[1] for t in marked] == ["0", "1", "2", "3"]
    assert "▸" not in "".join(text(r) for r in rows)
    assert MARK in LEGEND and "deployment" in LEGEND


def test_memory_budget_from_the_servers_flags() -> None:
    assert memory_budget(cs.ARGV, "sglang") == 0.9  # not given: the server's default
    assert memory_budget([*cs.ARGV, "--mem-fraction-static", "0.85"], "sglang") == 0.85
    assert memory_budget(["--mem-fraction-static=0.8"], "sglang") == 0.8
    assert memory_budget(["--mem-fraction-static", "0.7", "--mem-fraction-static", "0.75"], "sglang") == 0.75
    assert memory_budget(["vllm", "serve", "m", "--gpu-memory-utilization", "0.95"], "vllm") == 0.95
    assert memory_budget(["--gpu_memory_utilization=0.6"], "vllm") == 0.6
    assert memory_budget(["--mem-fraction-static", "lots"], "sglang") == 0.9  # not a number: the default
    assert memory_budget(["--mem-fraction-static", "0.8"], "other") is None


def test_a_healthy_sglang_server_at_its_budget_is_not_warned() -> None:
    """mem-fraction-static 0.9 (plus activations and CUDA graphs outside it): 91 % used is how it serves."""
    rows = gpu_rows(rows_for(snap_at(0.914), {}, ALL, 106324, False, 80, None, 0.9))
    assert len(rows) == 8
    for r in rows:
        assert not styles(r) & {"yellow", "red", "bold red"}, r
    assert memory_level(0.914, None) == "ok"  # with no budget known, only nearly full memory is called out


@pytest.mark.parametrize(("frac", "budget", "style", "note"), [
    (0.914, 0.7, "yellow", "above the server's budget (70%)"),  # told 0.7, holds 0.91: something else is there
    (0.99, 0.9, "bold red", "nearly full"),
    (0.99, None, "bold red", "nearly full"),
    (0.96, None, "yellow", "above 95%"),
])
def test_memory_above_the_budget_or_nearly_full_is_warned(frac: float, budget: float | None, style: str,
                                                          note: str) -> None:
    rows = rows_for(snap_at(frac), {}, ALL, 106324, False, 80, None, budget)
    for r in gpu_rows(rows):
        assert style in styles(r), r
    assert any(note in text(r) for r in rows), [text(r) for r in rows]


def test_memory_on_gpus_outside_the_deployment_is_a_note_of_its_own() -> None:
    rows = rows_for(snap_at(0.5), {}, [0, 1, 2, 3, 4, 5], 106324, False, 80, None, 0.9)
    outside = [r for r in gpu_rows(rows) if not text(r).startswith(MARK)]
    assert len(outside) == 2 and all("magenta" in styles(r) for r in outside)
    assert any("GPU 6,7, outside the deployment" in text(r) for r in rows), [text(r) for r in rows]


def test_util_temperature_and_power_are_coloured_only_when_wrong() -> None:
    normal = gpu_rows(rows_for(cs.gpus(128.4, 95), {}, ALL, 106324, False, 100, None, 0.9))
    assert all(not styles(r) & {"yellow", "red", "bold red", "bold yellow"} for r in normal)  # busy is normal
    hot = gpu_rows(rows_for(snap_at(0.9, temp_c=92.0, power_w=699.0), {}, ALL, 106324, False, 100, None, 0.9))
    for r in hot:
        assert ("92°C", "bold red") in [(t.strip(), s) for t, s in r]
        assert ("699/700 W", "yellow") in [(t.strip(), s) for t, s in r]


@pytest.mark.parametrize("width", [30, 35, 36, 38, 40, 50, 60, 76, 106, 150])
def test_rows_fit_the_width_and_no_value_is_cut(width: int) -> None:
    """At 80x24 the panel is about 36 wide: power used to be cut (`4…`); now the least telling columns go."""
    rows = rows_for(cs.gpus(128.4, 68), cs.history(128.4), ALL, 106324, False, width, None, 0.9)
    for r in rows[:9]:
        assert len(text(r)) <= width, (width, text(r))
    for r in gpu_rows(rows):
        assert text(r).rstrip().endswith(" W") or "history" in text(rows[0]), text(r)
        assert "GiB" in text(r) and "%" in text(r)


def test_bars_and_history_grow_with_the_width() -> None:
    """At 220x60 the panel is about 106 wide: half of it was blank (a 20-cell bar, a 12-cell sparkline)."""
    gpus = cs.gpus(128.4, 68).gpus
    narrow, wide = columns(gpus, 60), columns(gpus, 106)
    assert wide.bar > narrow.bar and wide.history > narrow.history
    assert wide.width == 106
    rows = rows_for(cs.gpus(128.4, 68), cs.history(128.4, 80), ALL, 106324, False, 106, None, 0.9)
    assert all(len(text(r)) == 106 for r in gpu_rows(rows))
    # narrow: the history goes first, then the temperature; the bar stays while it can be 4 cells
    at36 = columns(gpus, 36)
    assert at36.history == 0 and not at36.temp and at36.bar >= 4
    assert columns(gpus, 40).temp


def test_a_hot_gpu_is_named_when_the_temperature_column_is_left_out() -> None:
    rows = rows_for(snap_at(0.9, temp_c=91.0), {}, ALL, 106324, False, 36, None, 0.9)
    assert "temp" not in text(rows[0])
    assert any("hot: GPU 0 91°C" in text(r) for r in rows), [text(r) for r in rows]


def test_a_lost_gpu_and_missing_values() -> None:
    s = cs.gpus(128.4, 68)
    lost = dataclasses.replace(s.gpus[1], lost=True, error="GPU is lost")
    blank = GpuSample(index=2)
    rows = rows_for(dataclasses.replace(s, gpus=(s.gpus[0], lost, blank)), {}, [0, 1, 2], 1, False, 60)
    assert "LOST GPU is lost" in text(rows[2])
    assert "-/- GiB" in text(rows[3]) and " -%" in text(rows[3]) and "- W" in text(rows[3])
