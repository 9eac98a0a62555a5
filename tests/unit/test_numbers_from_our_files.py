"""Numbers in files bringup wrote earlier are taken as every number from outside is (issue 47 review, finding 7;
tui/guard/numbers.py): by the time they are read back, the file is outside this process (a hand edit, a broken or
newer writer, another user's plant in a shared state directory). Before, each reader took them with `float()` and
`int()`: a sweep's `completed: Infinity` crashed `bringup sweep report` (OverflowError), `"nan"`, `"inf"` and `true`
were read as measurements, a shared-generations line `x inf inf 5` as a generation, a lock record's `since: "-inf"`
crashed whoever named the holder, and the GPU baseline took `"inf"` and `true` as MiB. Now a bad value is skipped
or absent, with a note where one can be shown, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.sweep_records import BAD_CELLS, NOW, cell, write_results
from tui.collectors.shared_generations import SharedGenerations
from tui.config.parts import HostConfig
from tui.engine.gpus import GpuTracker
from tui.managers.lock_record import lock_info_from
from tui.sweep.charts import render_report
from tui.sweep.results import CellMetrics, read_results
from tui.transport.local import LocalTransport


@pytest.mark.parametrize("bad", BAD_CELLS, ids=["completed-Infinity", "duration-nan-text", "tok_s-inf-text",
                                                "req_s-true", "completed-1e308", "concurrency-1_0", "at-minus-inf"])
def test_a_sweep_record_with_a_number_that_is_none_is_skipped_with_a_note(tmp_path: Path,
                                                                        bad: dict[str, Any]) -> None:
    good = cell({}, cell="p128-o64-c2-r0", concurrency=2)
    res = read_results(write_results(tmp_path / "out", [good, bad]))
    assert [c.cell for c in res.cells] == ["p128-o64-c2-r0"]
    assert len(res.notes) == 1 and "line 2 (cell) skipped" in res.notes[0], res.notes
    assert render_report(res)  # the report is drawn from what could be read


def test_an_optional_measurement_that_is_none_is_absent() -> None:
    m = CellMetrics.from_json({"tok_s_user": "-Infinity", "tok_s_gpu": True, "accept_len": 1e400,
                               "ttft_ms": {"mean": "nan", "p50": 12.5}})
    assert (m.tok_s_user, m.tok_s_gpu, m.accept_len, m.ttft_ms.mean, m.ttft_ms.p50) == (None, None, None, None, 12.5)


def test_a_sweep_json_with_a_number_that_is_none_is_no_meta_with_a_note(tmp_path: Path) -> None:
    res = read_results(write_results(tmp_path / "out", [cell({})],
                                     meta={"deployment": "sim", "started_at": "inf", "pid": 1}))
    assert res.meta is None and [c.cell for c in res.cells] == ["p128-o64-c1-r0"]
    assert any("sweep.json skipped" in n and "started_at" in n for n in res.notes), res.notes


def test_a_shared_generations_line_with_numbers_that_are_none_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "generations"
    path.write_text("other inf inf 5\nother nan nan 1\nother 1e999 1e999 1\nother 1780000000 1780000001 1_0\n"
                    "other -5 -4 3\nother 1780000000.000 1780000001.500 7\n")
    path.chmod(0o600)
    news = SharedGenerations(path, "me", keep_s=600).news()
    assert [(g.began, g.ended, g.tokens) for g in news] == [(1_780_000_000.0, 1_780_000_001.5, 7)]


@pytest.mark.parametrize("record", [
    b'{"who": "eve@h", "since": "-inf", "pid": true, "purpose": "restart"}',
    b'{"who": "eve@h", "since": 1e400, "pid": 1e400, "purpose": "restart"}',
    b'{"who": "eve@h", "since": -1e300, "pid": -3, "purpose": "restart"}',
    b'{"who": "eve@h", "since": "1780000000", "pid": "12", "purpose": "restart"}',
])
def test_a_lock_record_with_numbers_that_are_none_names_the_holder_without_them(record: bytes) -> None:
    info = lock_info_from(record)
    assert info is not None and (info.pid, info.since) == (0, 0.0)
    assert info.describe() == "eve@h (pid 0) restart since ?"  # -inf crashed here (time.localtime)


def test_a_lock_record_with_good_numbers_keeps_them() -> None:
    info = lock_info_from(json.dumps({"who": "eve@h", "since": NOW, "pid": 4242, "purpose": "restart"}))
    assert info is not None and (info.pid, info.since) == (4242, NOW)


@pytest.mark.parametrize("baseline", [{"0": "inf"}, {"0": True}, {"0": 1e400}, {"0": -5.0}, {"x": 100.0},
                                      {"1_0": 100.0}, [1, 2]])
def test_a_gpu_baseline_with_a_number_that_is_none_is_no_baseline_with_a_note(tmp_path: Path,
                                                                              baseline: object) -> None:
    path = tmp_path / "gpu-baseline.json"
    path.write_text(json.dumps(baseline))
    t = GpuTracker(HostConfig(), LocalTransport(), [0], path)
    assert t.baseline_mib == {} and "was not taken" in t.baseline_note


def test_a_gpu_baseline_as_written_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "gpu-baseline.json"
    path.write_text(json.dumps({"0": 512.0, "3": 0}))
    t = GpuTracker(HostConfig(), LocalTransport(), [0], path)
    assert t.baseline_mib == {0: 512.0, 3: 0.0} and t.baseline_note == ""
