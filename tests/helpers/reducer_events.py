"""Lifecycle events as a server's log and its unit give them, and the reducer fed with them
(tui/lifecycle/reducer.py): the real wordings of SGLang's startup, quoted from its sources (section and source cited
per constant), and a run seen from its start to its ready line. Event times are plain seconds."""

from __future__ import annotations

from collections.abc import Iterable

from tui.lifecycle.presets import get_preset
from tui.lifecycle.reducer import LifecycleState, MemoryObserved, initial, reduce
from tui.model import Event, LogLine, Phase, ProbeResult, UnitObserved, UnitState

SGLANG = get_preset("sglang")
VLLM = get_preset("vllm")

# the released wheels (0.5.23 `model_runner.py`), with the K2.6 deployment's `[ts TP0 EP0]` prefix
LOAD_BEGIN = "[2026-05-29 16:59:48 TP0 EP0] Load weight begin. avail mem=94.00 GB"
# the K2.6 DFlash deployment
LOAD_END = ("[2026-05-29 17:01:02 TP0 EP0] Load weight end. elapsed=73.65 s, type=KimiK25ForConditionalGeneration, "
            "quant=compressed-tensors, avail mem=21.76 GB, mem usage=72.24 GB.")
# PR #17392
CAPTURE_BEGIN = "[2026-05-07 05:56:32 DP3 TP3 EP3] Capture cuda graph begin. This can take up to several minutes."
# sglang #2468
UVICORN_STARTED = "[2024-12-13 01:45:02] INFO:     Started server process [3831493]"
# per the released wheels: SGLang's readiness line (`entrypoints/http_server.py` `_wait_and_warmup`)
READY_LINE = "[2026-05-29 17:05:40] The server is fired up and ready to roll!"
# sglang #23602
SCHED_EXC = "[2026-06-02 08:00:20 TP0 EP0] Scheduler hit an exception: Traceback (most recent call last):"
# the traceback that follows it: frames in SGLang's layout (scheduler.py `run_scheduler_process`), ending in
# PyTorch's OOM wording from the released wheels
OOM_TRACEBACK = (
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2890, '
    "in run_scheduler_process",
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 520, '
    "in initialize",
    "    self.init_memory_pool(min_mem)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "139.81 GiB of which 1.12 GiB is free.",
)
# the K2.6 DFlash crash: DFLASH verify under CUDA graphs faults at the first graph replay (as the sim prints it)
REPLAY_TRACEBACK = (
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/speculative/dflash_worker_v2.py", line 715, '
    "in forward_batch_generation",
    "    verify_output = self.verify(batch)",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 1021, '
    "in replay",
    "    self.graphs[self.bs].replay()",
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
)
# the released wheels (PR #22166)
DECODE_LINE = ("[2026-04-05 20:02:51] Decode batch, #running-req: 32, #token: 11179, token usage: 0.08, "
               "cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0")
#: a decode line of `n` running and `q` queued requests, at a throughput a probe alone gives
DECODE_LINE_OF = ("[2026-04-05 20:02:51] Decode batch, #running-req: {n}, #token: 120, token usage: 0.00, "
                  "cuda graph: True, gen throughput (token/s): 0.13, #queue-req: {q}")
# the K2.6 DFlash systemd unit's command line
DFLASH_ARGV = ("/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/root/models/Kimi-K2.6",
               "--tp-size", "8", "--ep-size", "8", "--speculative-algorithm", "DFLASH",
               "--speculative-draft-model-path", "/root/models/Kimi-K2.6-DFlash-tmp-long",
               "--speculative-dflash-block-size", "8", "--port", "30001")

INV = "8d6f0c3a9b2e4f1d"


def unit(at: float, active: str = "active", *, inv: str = INV, started: float | None = None, sub: str = "running",
         exit_status: int | None = None, argv: tuple[str, ...] = ()) -> UnitObserved:
    return UnitObserved(at, UnitState(active=active, sub=sub, main_pid=4242, invocation=inv, started_at=started,
                                      exit_status=exit_status, argv=argv))


def line(at: float, text: str, inv: str = INV) -> LogLine:
    return LogLine(at=at, text=text, invocation=inv)


def gen(at: float, ok: bool = True) -> ProbeResult:
    return ProbeResult(at=at, kind="generate", ok=ok, status=200 if ok else None)


def feed(events: Iterable[Event | MemoryObserved], state: LifecycleState | None = None, preset=SGLANG,
         **kw: object) -> LifecycleState:
    s = state if state is not None else initial(**kw)  # type: ignore[arg-type]
    for ev in events:
        s = reduce(s, ev, preset)
    return s


def phases(s: LifecycleState) -> list[Phase]:
    return [t.phase for t in s.timeline]


def loading(t0: float = 100.0) -> list[Event]:
    return [unit(t0, started=t0), line(t0 + 1, LOAD_BEGIN)]


def warmup_seen(t0: float = 100.0) -> list[Event]:
    """Up to and including the ready line: the reducer is waiting for a generation."""
    return [*loading(t0), line(t0 + 2, LOAD_END), line(t0 + 3, CAPTURE_BEGIN), line(t0 + 4, UVICORN_STARTED),
            line(t0 + 5, READY_LINE)]


#: SGLang's parent reporting a scheduler killed by the OOM killer: a fatal wording at INFO, with no trouble word
FATAL_AT_INFO = "[2026-11-29 10:00:05] Scheduler or DataParallelController 1 terminated with -9"
