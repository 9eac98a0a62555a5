"""The engine for one deployment (tui/engine/core.py), split by stream: unit, logs, gpus, throughput, probes, the view
helpers, and the typed updates it sends its front ends.
"""

from __future__ import annotations

from .build import make_transport
from .core import Engine
from .gpu_sampler import GPU_INTERVAL_S
from .gpus import HISTORY, GpuHistory
from .throughput import MetricsState
from .updates import (
    CollectorFailed,
    GpusSampled,
    HolderChanged,
    LogsRead,
    PhaseChanged,
    PictureTaken,
    ProbeAnswered,
    ThroughputSampled,
    Update,
)
from .view import STALE_AFTER_S, describe_probe

__all__ = [
    "GPU_INTERVAL_S", "HISTORY", "STALE_AFTER_S", "CollectorFailed", "Engine", "GpuHistory", "GpusSampled",
    "HolderChanged", "LogsRead", "MetricsState", "PhaseChanged", "PictureTaken", "ProbeAnswered", "ThroughputSampled",
    "Update", "describe_probe", "make_transport",
]
