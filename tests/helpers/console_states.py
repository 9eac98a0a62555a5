"""Fixed console states for snapshot tests and screenshots: plain data, no clock, no randomness.

The numbers are those of the simulated 8 x H200 deployment (Kimi K2.6 on SGLang); the failure excerpt is the
DFLASH + CUDA graph crash the simulator prints (modelled on the K2.6 DFlash crash)."""

from __future__ import annotations

from tui.lifecycle.presets.facts import resolve
from tui.model import (
    Failure,
    FailureKind,
    GpuProcess,
    GpuSample,
    GpuSnapshot,
    Phase,
    ReleaseSeen,
    ReleaseSource,
    Snapshot,
    Step,
    ThroughputSample,
    Transition,
    UnitState,
)
from widgets.gpus import memory_budget

T0 = 1_795_900_000.0
ARGV = ("python3", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.6", "--tp-size", "8",
        "--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8", "--enable-metrics")
PHASE_AT = {Phase.STARTING: 0.0, Phase.LOADING: 1.2, Phase.GRAPH_CAPTURE: 74.0, Phase.WARMUP: 96.0,
            Phase.READY: 101.0}
#: the release the ready server names (its facts, known or not, leave the header's words the same: `SGLang 0.5.23`)
RELEASE = "0.5.23"
#: what the engine's picture says of the deployment beside its run: the server, what its `process` manager runs
SERVER = "SGLang"
TARGET = "process " + " ".join(ARGV[:3])


def snapshot(phase: Phase, *, failure: Failure | None = None, stalled: float | None = None) -> Snapshot:
    order = list(PHASE_AT)
    upto = order[: order.index(phase) + 1] if phase in PHASE_AT else order[:4]
    timeline = [Transition(p, T0 + PHASE_AT[p], "") for p in upto]
    if phase == Phase.FAILED:
        timeline.append(Transition(Phase.FAILED, T0 + 99.5, ""))
    unit = UnitState(active="active", sub="running", main_pid=106324, invocation="3f9c2a1be0d84c57", argv=ARGV)
    if phase == Phase.STOPPED:  # mid-restart: the old run was stopped and is releasing its memory
        timeline = [*(Transition(p, T0 + PHASE_AT[p] - 600, "") for p in order),
                    Transition(Phase.STOPPING, T0 + 95.0, ""), Transition(Phase.STOPPED, T0 + 99.1, "")]
        unit = UnitState(active="inactive", sub="dead", main_pid=0, invocation=unit.invocation, argv=ARGV)
    # once ready, the server has named its release (SGLang's /server_info): the header shows it
    seen = ReleaseSeen(RELEASE, ReleaseSource.HTTP, T0 + 101.5, "/server_info") if phase == Phase.READY else None
    return Snapshot(deployment="k26-dflash", host="gpu-box", phase=phase, invocation=unit.invocation,
                    timeline=tuple(timeline), failure=failure, stalled_for=stalled, unit=unit, gpus=None,
                    throughput=None, flags=ARGV, endpoint="generation ok 0.21s" if phase == Phase.READY else
                    "connect: refused", release_seen=seen,
                    release=resolve("sglang", RELEASE) if seen is not None else None, server=SERVER, target=TARGET,
                    memory_budget=memory_budget(unit.argv, "sglang"))


def gpus(used_gib: float, util: float, pid: int = 106324) -> GpuSnapshot:
    rows = tuple(GpuSample(index=i, uuid=f"GPU-{i:08d}", name="NVIDIA H200", mem_used_mib=used_gib * 1024 + i * 37,
                           mem_total_mib=143771, util_pct=util, temp_c=40 + util * 0.3, power_w=120 + util * 5,
                           power_limit_w=700) for i in range(8))
    procs = tuple(GpuProcess(pid=pid, name="python3", used_mib=used_gib * 1024, gpu_index=i) for i in range(8)) \
        if used_gib > 1 else ()
    return GpuSnapshot(at=T0 + 100, gpus=rows, processes=procs)


def history(peak: float, n: int = 40) -> dict[int, list[float]]:
    return {i: [min(peak, peak * k / (n * 0.6)) * 1024 for k in range(n)] for i in range(8)}


def throughput() -> tuple[ThroughputSample, list[tuple[float, float]]]:
    hist = [(T0 + 40 + k, 150.0 + 20 * ((k * 7) % 5) + k) for k in range(60)]
    return (ThroughputSample(at=T0 + 100, tokens_per_s=211.4, source="metrics", running=4, queued=0,
                             accept_len=3.21, accept_rate=0.45), hist)


DFLASH_EXCERPT = (
    "[2026-05-29 17:05:17 TP0 EP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "sglang/srt/model_executor/cuda_graph_runner.py", line 1021, in replay',
    "    self.graphs[self.bs].replay()",
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
)
FAILURE = Failure(phase=Phase.WARMUP, kind=FailureKind.CUDA_GRAPH, excerpt=DFLASH_EXCERPT, at=T0 + 99.5,
                  hint="CUDA graphs crashed with DFLASH speculative decoding: restart with CUDA graphs off "
                       "(`bringup restart k26-dflash --set disable-cuda-graph`, or in the console: f, g, a).")

RESTART_STEPS = [
    Step("lock", "done", "lock taken (ops@console, pid 4242)", T0),
    Step("flags", "done", "flags written: + --disable-cuda-graph", T0),
    Step("stop", "done", "stopped in 4.1 s", T0),
    Step("release", "running", "waiting for GPU memory: 412.3 GiB held on GPU 2-7 by PID 106324", T0),
]

LOG_LINES = [
    "[2026-05-29 17:01:02 TP0 EP0] Load weight end. elapsed=73.65 s, type=KimiK25ForConditionalGeneration, "
    "quant=compressed-tensors, avail mem=21.76 GB, mem usage=72.24 GB.",
    "[2026-05-29 17:03:40 TP0 EP0] WARNING: [bold]markup[/] in a log line is shown as written",
    *DFLASH_EXCERPT,
]


SUB = "k26-dflash @ gpu-box  sglang-k26-dflash.service  SGLang 0.5.23  [read-only]  esc: all deployments"
