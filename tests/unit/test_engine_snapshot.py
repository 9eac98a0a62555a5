"""A front end reads the engine's `Snapshot` and its typed updates, nothing else: what a console opening a deployment
draws at once (each GPU's memory history, the tokens/s history) and what it says when the unit cannot be read (the
unit collector's error) are in the snapshot."""

from __future__ import annotations

import time
from pathlib import Path

from tests.helpers.simdeploy import settings_for
from tui.engine import CollectorFailed, Engine, Update
from tui.model import GpuSample, GpuSnapshot, NoteSource, ThroughputSample


async def test_the_snapshot_carries_the_histories_and_the_collector_errors(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    e = Engine(settings, "sim", settings.deployments["sim"])
    told: list[Update] = []
    e.subscribe(told.append)
    try:
        now = time.time()
        for i, mib in enumerate((1000.0, 2000.0)):
            gpus = (GpuSample(0, mem_used_mib=mib), GpuSample(1, mem_used_mib=5.0))
            e.observe_gpus(GpuSnapshot(at=now + i, gpus=gpus))
        e._throughput_sampled(ThroughputSample(at=now, tokens_per_s=42.0, source="metrics"))
        e.note_error("unit", "gpu-box: SSH connection timed out")
        snap = e.snapshot()
        assert snap.gpu_history == {0: (1000.0, 2000.0), 1: (5.0, 5.0)}
        assert snap.tps_history == ((now, 42.0),)
        assert snap.collector_errors == {"unit": "gpu-box: SSH connection timed out"}
        assert [u.note.source for u in told if isinstance(u, CollectorFailed)] == [NoteSource.UNIT]
        e.collector_errors.cleared("unit")
        assert e.snapshot().collector_errors == {} and snap.collector_errors  # a snapshot is a copy, kept as taken
    finally:
        await e.close()
