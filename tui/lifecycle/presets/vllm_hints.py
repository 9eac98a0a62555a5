"""vLLM's hints, worded for one release: each names only flags that release's parser takes.

The flag that caps the batch sizes captured in CUDA graphs changed: `--cuda-graph-sizes` (0.9 to 0.11),
`--max-cudagraph-capture-size` (from 0.12), neither in 0.8. A hint naming the other release's flag makes the server
refuse its command line, so the words come from the release's facts (tests/unit/test_conformance.py checks them).
"""

from __future__ import annotations

from tui.lifecycle.presets import HintFn, HintTable
from tui.lifecycle.presets.common import COMMON_HINTS, kernel_hint
from tui.lifecycle.presets.facts import ReleaseFacts
from tui.model import FailureKind

__all__ = ["hints_for"]


def _capture_cap(facts: ReleaseFacts | None) -> str:
    for flag in ("--max-cudagraph-capture-size", "--cuda-graph-sizes"):
        if facts is None or facts.option(flag) is not None:
            return flag
    return ""


def hints_for(facts: ReleaseFacts | None, known: bool = True) -> HintFn:
    """The hints as this release words them (None: the newest wording, for a preset with no facts at all)."""
    cap = _capture_cap(facts)
    backends = tuple(f for f in ("--attention-backend", "--linear-backend", "--moe-backend")
                     if facts is None or facts.option(f) is not None)
    lower = f"lower {cap}, or restart" if cap else "restart"
    return HintTable(
        by_kind={
            **COMMON_HINTS,
            FailureKind.CUDA_GRAPH: f"CUDA graph capture/compile failed: {lower} with --set enforce-eager (no CUDA "
                                    "graphs, no torch.compile).",
            FailureKind.OOM: "CUDA out of memory: lower --gpu-memory-utilization or --max-num-seqs, or --set "
                             "enforce-eager.",
            FailureKind.NCCL: "NCCL failed: one rank probably died first (find the earliest traceback); rerun with "
                              "NCCL_DEBUG=INFO.",
            FailureKind.PORT_IN_USE: "The port is taken: another server (or the previous run) is listening on it "
                                     "(`ss -ltnp`).",
            FailureKind.SCHEDULER_DIED: "An engine process died: exit code -9 usually means the OS OOM killer (check "
                                        "`dmesg`); otherwise the first traceback is the cause.",
            FailureKind.WARMUP: "The API server failed while starting: read the excerpt.",
            FailureKind.KERNEL: kernel_hint(backends),
        },
        while_loading={
            FailureKind.OOM: "Not enough GPU memory: memory may still be held by a previous run (`bringup restart` "
                             "waits for release), or lower --gpu-memory-utilization / --max-model-len, or raise "
                             "--tensor-parallel-size.",
        },
        default="The engine reported a fatal error: read the excerpt; the root cause is usually the first traceback.",
    )
