"""SGLang 0.4 to 0.5.23: wordings from notes on the released wheels and real logs in public issues."""

from __future__ import annotations

import re

from tui.lifecycle.presets import Classifier, FlagSpec, HintTable, Marker, Preset, rx
from tui.lifecycle.presets.common import (
    BAD_ARGS,
    COMMON_CLASSIFIERS,
    COMMON_HINTS,
    CONSEQUENCE,
    CUDA_GRAPH,
    GENERATION_OK,
    GRAPH_FRAMES,
    LOADING_FRAMES,
    STOPPING,
    WARMUP_FRAMES,
)
from tui.model import FailureKind, Phase

MARKERS = (
    Marker(Phase.STARTING, rx(r"^server_args=", r"^Launch(?:ing)? (?:the )?server")),
    Marker(Phase.LOADING, rx(
        r"^Init torch distributed begin",
        r"^Load weight begin",
        r"Loading safetensors checkpoint shards",
        r"^Multi-thread loading shards",
        r"^Load weight end",
        r"KV Cache is allocated",
        r"^Memory pool end",
    )),
    Marker(Phase.GRAPH_CAPTURE, rx(
        r"^Capture (?:\w+ )*cuda graph begin",
        r"^Capture (?:\w+ )*CUDA graph begin",
        r"^Capture (?:\w+ )*(?:cuda|CUDA) graph end",
        r"^Capture cuda graph bs",
        r"^Capturing batches",
        r"^Capturing prefill shape",
        r"^Capturing num tokens",
        r"^Compiling num tokens",
    )),
    Marker(Phase.WARMUP, rx(
        r"Prefill batch[.,]",
        r"Started server process",
        r"Waiting for application startup",
        r"Application startup complete",
        r"Uvicorn running on",
    )),
)

READY = rx(r"The server is fired up and ready to roll")

#: the scheduler's watchdog: a forward step ran longer than --watchdog-timeout, on any rank; SGLang then
#: SIGQUITs the tree. 0.4-0.5.x: `Watchdog timeout (self.watchdog_timeout=300)`; 0.5.23: `Scheduler watchdog
#: timeout (self.watchdog_timeout=300, self.soft=False)` (a soft watchdog only dumps and carries on)
WATCHDOG = r"[Ww]atchdog timeout \(self\.watchdog_timeout=[^,)]*(?:\)|, self\.soft=False)"

FATAL = rx(
    BAD_ARGS,
    r"Scheduler hit an exception",
    r"Received sigquit from a child process",
    r"SIGQUIT received\. signum=",
    r"Capture cuda graph failed",
    r"CUDA out of memory",
    r"OutOfMemoryError",
    r"scheduler died during initialization",
    r"scheduler is dead",
    r"^Initialization failed",
    r"[Ss]erver warmup failed",
    r"Subprocess \S+ \(pid=\d+\) crashed",
    r"Scheduler or DataParallelController \d+ terminated",
    WATCHDOG,
    r"Watchdog caught collective operation timeout",
    r"terminate called after throwing an instance of",
    r"Not enough memory\. Please try to increase --mem-fraction-static",
    r"leave no GPU memory for the KV cache",
    r"[Aa]ddress already in use",
    r"DetokenizerManager hit an exception",
    r"TokenizerManager hit an exception",
    r"NCCL error",
)

CLASSIFIERS = (
    *COMMON_CLASSIFIERS,
    Classifier(FailureKind.CUDA_GRAPH, CUDA_GRAPH),
    Classifier(FailureKind.WARMUP, rx(r"warmup error", r"Initialization failed\. warmup", r"[Ss]erver warmup failed")),
    Classifier(FailureKind.SCHEDULER_DIED, rx(
        r"scheduler died during initialization",
        r"scheduler is dead",
        r"Subprocess \S+ \(pid=\d+\) crashed",
        r"Scheduler or DataParallelController \d+ terminated",
        WATCHDOG,
        r"Scheduler hit an exception",
    )),
)

FLAGS = (
    FlagSpec("disable-cuda-graph", "bool", "turn CUDA graphs off (slower decode, no capture phase)", key="g"),
    FlagSpec("cuda-graph-backend-decode", "choice", "decode CUDA graph backend (0.5.18+)",
             choices=("full", "breakable", "disabled")),
    FlagSpec("cuda-graph-max-bs", "int", "largest batch captured in a CUDA graph (gone in 0.5.21)",
             minimum=1, maximum=4096),
    FlagSpec("enable-metrics", "bool", "serve Prometheus /metrics (tokens/s, accept length)", key="m"),
    FlagSpec("mem-fraction-static", "float", "fraction of GPU memory for weights + KV cache",
             minimum=0.05, maximum=0.99),
    FlagSpec("tp-size", "int", "tensor parallel size", aliases=("tp", "tensor-parallel-size"),
             minimum=1, maximum=64),
    FlagSpec("ep-size", "int", "expert parallel size", aliases=("ep",), minimum=1, maximum=64),
    FlagSpec("speculative-algorithm", "choice", "speculative decoding algorithm",
             choices=("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK")),
    FlagSpec("speculative-draft-model-path", "str", "draft model", aliases=("speculative-draft-model",)),
    FlagSpec("speculative-num-draft-tokens", "int", "verify window", minimum=1, maximum=64),
    FlagSpec("speculative-dflash-block-size", "int", "DFLASH block size (verify window)", minimum=1, maximum=64),
    FlagSpec("speculative-num-steps", "int", "draft steps", minimum=1, maximum=64),
    FlagSpec("speculative-eagle-topk", "int", "draft top-k", minimum=1, maximum=64),
    FlagSpec("decode-log-interval", "int", "decode steps between `Decode batch` log lines", minimum=1),
    FlagSpec("skip-server-warmup", "bool", "skip the warmup request (hides warmup failures)"),
    FlagSpec("watchdog-timeout", "float", "seconds before a hung scheduler is killed", minimum=1),
)


HINTS = HintTable(
    by_kind={
        **COMMON_HINTS,
        FailureKind.CUDA_GRAPH: "CUDA graph capture/replay failed: lower --cuda-graph-max-bs or --mem-fraction-static, "
                                "or restart with CUDA graphs off (--set disable-cuda-graph).",
        FailureKind.OOM: "CUDA out of memory: lower --mem-fraction-static, or --cuda-graph-max-bs, "
                         "or turn CUDA graphs off (--set disable-cuda-graph).",
        FailureKind.NCCL: "NCCL failed: one rank probably died first (find the earliest traceback); check the GPUs "
                          "with `nvidia-smi topo -m`, and rerun with NCCL_DEBUG=INFO for details.",
        FailureKind.PORT_IN_USE: "The port is taken: the previous server may still be shutting down, or another "
                                 "process uses it (`ss -ltnp`).",
        FailureKind.WARMUP: "The HTTP server came up but the warmup request failed: check proxies (no_proxy for "
                            "127.0.0.1) and the model's chat template; --skip-server-warmup hides this but does not "
                            "fix it.",
        FailureKind.SCHEDULER_DIED: "A scheduler process died or hung: exit code -9 usually means the OS OOM killer "
                                    "(check `dmesg` and host RAM); a watchdog timeout means one forward step outlasted "
                                    "--watchdog-timeout (a stuck collective or GPU; raise it only for steps that are "
                                    "legitimately that slow); otherwise the first traceback is the cause.",
    },
    while_loading={
        FailureKind.OOM: "CUDA out of memory while loading: memory may still be held by the previous run "
                         "(`bringup restart` waits for release; check the GPU panel), or the model does not fit: "
                         "lower --mem-fraction-static or raise --tp-size.",
    },
    default="The server reported a fatal error: read the excerpt; the first traceback is usually the cause.",
)


def hint(kind: FailureKind, phase: Phase, flags: dict[str, str | None]) -> str:
    """The table's hint, except for the one the flags decide: CUDA graphs that crash under speculative decoding
    (the K2.6 DFLASH crash) are turned off, not tuned."""
    spec = flags.get("speculative-algorithm")
    graphs_on = "disable-cuda-graph" not in flags and flags.get("cuda-graph-backend-decode") != "disabled"
    if kind == FailureKind.CUDA_GRAPH and spec and graphs_on:
        return (f"CUDA graphs crashed with {spec} speculative decoding: restart with CUDA graphs off "
                "(`bringup restart <deployment> --set disable-cuda-graph`, or in the console: f, g, a).")
    return HINTS(kind, phase, flags)


THROUGHPUT_LINE = re.compile(r"Decode batch(?: \[\d+\])?[.,]\s*(?P<rest>.*)$")

SGLANG = Preset(
    node_flags=("node-rank",),
    name="sglang",
    markers=MARKERS,
    ready=READY,
    fatal=FATAL,
    classifiers=CLASSIFIERS,
    hint=hint,
    flags=FLAGS,
    health_path="/health",
    models_path="/v1/models",
    throughput_line=THROUGHPUT_LINE,
    serving=rx(r"Decode batch(?: \[\d+\])?[.,] #running-req: [1-9]"),
    answered=rx(GENERATION_OK),
    phase_hints=(Marker(Phase.GRAPH_CAPTURE, GRAPH_FRAMES), Marker(Phase.WARMUP, WARMUP_FRAMES),
                 Marker(Phase.LOADING, LOADING_FRAMES)),
    stopping=STOPPING,
    consequence=CONSEQUENCE,
)
