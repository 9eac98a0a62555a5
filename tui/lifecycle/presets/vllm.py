"""vLLM 0.6 to 0.33: wordings from the 0.33.0 wheel and real logs in public issues."""

from __future__ import annotations

import re

from tui.lifecycle.presets import Classifier, FlagSpec, HintTable, Marker, Preset, rx
from tui.lifecycle.presets.common import (
    BAD_ARGS,
    COMMON_CLASSIFIERS,
    COMMON_HINTS,
    GENERATION_OK,
    GRAPH_FRAMES,
    LOADING_FRAMES,
    STOPPING,
)
from tui.model import FailureKind, Phase

MARKERS = (
    Marker(Phase.STARTING, rx(
        r"vLLM (?:API )?server version",
        r"^non-default args:",
        r"^args: Namespace\(",
        r"Initializing a V\d engine",
        r"Initializing an LLM engine",
    )),
    Marker(Phase.LOADING, rx(
        r"Starting to load model",
        r"Loading safetensors checkpoint shards",
        r"Loading weights took",
        r"Model loading took",
        r"Loading model weights took",
        r"Available KV cache memory",
        r"GPU KV cache size",
        r"# GPU blocks:",
    )),
    Marker(Phase.GRAPH_CAPTURE, rx(
        r"Dynamo bytecode transform time",
        r"Compiling a graph for",
        r"torch\.compile takes",
        r"Capturing CUDA graph",
        r"Capturing the model for CUDA graphs",
        r"Capturing cudagraphs",
        r"Graph capturing finished",
        r"CUDA graph pool memory",
    )),
    Marker(Phase.WARMUP, rx(
        r"init engine \(profile, create kv cache, warmup model\) took",
        r"Starting vLLM (?:API )?server",
        r"Supported tasks:",
        r"Available routes are",
        r"Started server process",
        r"Waiting for application startup",
    )),
)

READY = rx(r"Application startup complete")

FATAL = rx(
    BAD_ARGS,
    r"EngineCore failed to start",
    r"Engine core initialization failed",
    r"WorkerProc failed to start",
    r"WorkerProc hit an exception",
    r"EngineCore encountered a fatal error",
    r"Engine core process \S+ died unexpectedly",
    r"Process \S+ \(PID: \d+\) died with exit code",
    r"EngineDeadError",
    r"CUDA out of memory",
    r"OutOfMemoryError",
    r"No available memory for the cache blocks",
    r"is less than desired GPU memory utilization",
    r"KV cache is needed, which is larger than the available KV cache memory",
    r"[Aa]ddress already in use",
    r"Watchdog caught collective operation timeout",
    r"terminate called after throwing an instance of",
    r"NCCL error",
)

#: vLLM's graph-capture phase also covers torch.compile, whose tracebacks name CUDA graph wrappers
#: (`compilation/cuda_graph.py`, `cudagraph_runtime_mode=`) without capturing anything: a CUDA graph failure
#: is one whose text says capture
CAPTURE = rx(
    r"[Cc]aptur(?:e|ing)\b.*(?:[Gg]raph|cudagraph)",
    r"(?:[Gg]raph|cudagraph).*[Cc]aptur(?:e|ing)\b",
    r"cudaErrorStreamCapture",
    r"error during capture",
    r"in capture_model\b",
    r"capture_end",
)

CLASSIFIERS = (
    *COMMON_CLASSIFIERS,
    Classifier(FailureKind.CUDA_GRAPH, CAPTURE),
    Classifier(FailureKind.SCHEDULER_DIED, rx(
        r"Engine core process \S+ died unexpectedly",
        r"Process \S+ \(PID: \d+\) died with exit code",
        r"WorkerProc hit an exception",
        r"EngineDeadError",
    )),
)

FLAGS = (
    FlagSpec("enforce-eager", "bool", "no CUDA graphs and no torch.compile (slower, faster start)", key="g"),
    FlagSpec("gpu-memory-utilization", "float", "fraction of GPU memory vLLM may use",
             minimum=0.05, maximum=0.99),
    FlagSpec("tensor-parallel-size", "int", "tensor parallel size", aliases=("tp",), short=("tp",),
             minimum=1, maximum=64),
    FlagSpec("data-parallel-size", "int", "data parallel size", aliases=("dp",), short=("dp",), minimum=1,
             maximum=64),
    FlagSpec("enable-expert-parallel", "bool", "expert parallelism for MoE", short=("ep",)),
    FlagSpec("max-model-len", "int", "context length", minimum=16),
    FlagSpec("max-num-seqs", "int", "maximum concurrent sequences", minimum=1),
    FlagSpec("max-cudagraph-capture-size", "int", "largest batch captured in a CUDA graph", minimum=1),
    FlagSpec("disable-log-stats", "bool", "turn off throughput logging and vllm:* stats"),
)


HINTS = HintTable(
    by_kind={
        **COMMON_HINTS,
        FailureKind.CUDA_GRAPH: "CUDA graph capture/compile failed: lower --max-cudagraph-capture-size, or restart "
                                "with --set enforce-eager (no CUDA graphs, no torch.compile).",
        FailureKind.OOM: "CUDA out of memory: lower --gpu-memory-utilization or --max-num-seqs, or --set "
                         "enforce-eager.",
        FailureKind.NCCL: "NCCL failed: one rank probably died first (find the earliest traceback); rerun with "
                          "NCCL_DEBUG=INFO.",
        FailureKind.PORT_IN_USE: "The port is taken: another server (or the previous run) is listening on it "
                                 "(`ss -ltnp`).",
        FailureKind.SCHEDULER_DIED: "An engine process died: exit code -9 usually means the OS OOM killer (check "
                                    "`dmesg`); otherwise the first traceback is the cause.",
        FailureKind.WARMUP: "The API server failed while starting: read the excerpt.",
    },
    while_loading={
        FailureKind.OOM: "Not enough GPU memory: memory may still be held by a previous run (`bringup restart` waits "
                         "for release), or lower --gpu-memory-utilization / --max-model-len, or raise "
                         "--tensor-parallel-size.",
    },
    default="The engine reported a fatal error: read the excerpt; the root cause is usually the first traceback.",
)


THROUGHPUT_LINE = re.compile(r"Avg generation throughput: (?P<tps>[\d.]+) tokens/s")

VLLM = Preset(
    node_flags=("node-rank", "headless", "data-parallel-start-rank", "data-parallel-rank", "data-parallel-size-local"),
    name="vllm",
    markers=MARKERS,
    ready=READY,
    fatal=FATAL,
    classifiers=CLASSIFIERS,
    hint=HINTS,
    flags=FLAGS,
    health_path="/health",
    models_path="/v1/models",
    throughput_line=THROUGHPUT_LINE,
    serving=rx(r"Avg generation throughput: (?:[1-9]\d*|0\.\d*[1-9])",
               r'"POST /v1/(?:chat/)?completions HTTP/1\.1" 200'),
    # vLLM starts its HTTP server only once the engine is up (notes/servers.md §0): any answered request, even
    # a refused one, was answered by a ready server
    answered=rx(GENERATION_OK, r'"(?:GET|POST|PUT|DELETE) /\S* HTTP/\d(?:\.\d)?" [1-5]\d\d\b'),
    phase_hints=(Marker(Phase.GRAPH_CAPTURE, GRAPH_FRAMES), Marker(Phase.LOADING, LOADING_FRAMES)),
    stopping=STOPPING,
    graph_evidence=CAPTURE,
)
