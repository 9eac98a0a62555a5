"""vLLM 0.6 to 0.34: wordings from the released wheels (0.8.5 ... 0.34.0) and real logs in public issues."""

from __future__ import annotations

import re

from tui.lifecycle.presets import Classifier, FlagSpec, Marker, Preset, Releases, rx
from tui.lifecycle.presets.common import (
    BAD_ARGS,
    COMMON_CLASSIFIERS,
    FOREIGN_WORDINGS,
    GENERATION_OK,
    GRAPH_FRAMES,
    KERNEL_FATAL,
    LOADING_FRAMES,
)
from tui.lifecycle.presets.common import STOPPING as COMMON_STOPPING
from tui.lifecycle.presets.vllm_hints import hints_for
from tui.lifecycle.presets.vllm_metrics import DETECTION, MEMORY_BUDGET, METRICS, METRICS_HINT, StatsLines
from tui.model import FailureKind, Phase

MARKERS = (
    Marker(Phase.STARTING, rx(
        # 0.8.5-0.11.0 `vLLM API server version %s` (entrypoints/openai/api_server.py); 0.15.0+ log_version_and_model:
        # `vLLM server version %s, serving model %s`, or by default its logo, whose second line names the release
        r"vLLM (?:API )?server version",
        r"\u2580\u2584\u2580 \u2588\s+version \S",
        r"^non-default args:",
        r"^args: Namespace\(",
        # `Initializing a V1 LLM engine (v%s) with config: %s` (v1/engine/core.py, 0.8.5 ... 0.34.0), V0 (engine/
        # llm_engine.py, 0.8.5-0.10.2); `Initializing an LLM engine (v%s)` before 0.8
        r"Initializing a V\d LLM engine \(v",
        r"Initializing an LLM engine",
    )),
    Marker(Phase.LOADING, rx(
        # `Starting to load model %s...`: v1/worker/gpu_model_runner.py 0.8.5-0.33.0 (gone with that runner in
        # 0.34.0); `Loading model from scratch...`: the V2 runner v1/worker/gpu/model_runner.py (0.15.0+, the only
        # one in 0.34.0) and 0.9.2-0.11.0's gpu_model_runner.py
        r"Starting to load model",
        r"^Loading model from scratch",
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

#: the releases that log each marker wording that not every covered release logs, in the facts of 0.5.5, 0.6.6, one
#: release of each minor 0.8 ... 0.12 and every release 0.13.0 ... 0.34.0: each bound is the first release with, or
#: without, the wording (tests/unit/test_conformance.py holds every release to it)
WORDING_RELEASES = {
    r"\u2580\u2584\u2580 \u2588\s+version \S": Releases(first="0.15.0"),
    r"^non-default args:": Releases(first="0.9.2"),
    r"Initializing a V\d LLM engine \(v": Releases(first="0.8.5"),
    r"Initializing an LLM engine": Releases(gone="0.8.5"),
    r"Starting to load model": Releases(gone="0.34.0"),  # with v1/worker/gpu_model_runner.py
    r"^Loading model from scratch": Releases(first="0.9.2"),
    r"Loading safetensors checkpoint shards": Releases(gone="0.10.2"),
    r"Loading weights took": Releases(first="0.8.5"),
    r"Model loading took": Releases(first="0.8.5"),
    r"Loading model weights took": Releases(gone="0.10.2"),
    r"Available KV cache memory": Releases(first="0.9.2"),
    r"GPU KV cache size": Releases(first="0.8.5", gone="0.30.0"),
    r"# GPU blocks:": Releases(gone="0.8.5"),
    r"Dynamo bytecode transform time": Releases(first="0.6.6"),
    r"Compiling a graph for": Releases(first="0.6.6"),
    r"torch\.compile takes": Releases(first="0.6.6", gone="0.18.0"),
    r"Capturing CUDA graph": Releases(first="0.6.6", gone="0.34.0"),
    r"Capturing the model for CUDA graphs": Releases(gone="0.6.6"),
    r"Capturing cudagraphs": Releases(first="0.6.6", gone="0.11.0"),
    r"CUDA graph pool memory": Releases(first="0.18.0"),
    r"init engine \(profile, create kv cache, warmup model\) took": Releases(first="0.6.6"),
    r"Starting vLLM (?:API )?server": Releases(first="0.8.5"),
    r"Supported tasks:": Releases(first="0.6.6"),
}

#: a clean shutdown, and vLLM's own word for SIGTERM during start-up: its handler `raise KeyboardInterrupt(
#: "terminated")` (entrypoints/openai/api_server.py 0.8.5-0.25.0, entrypoints/launchers/api_server/entry.py
#: 0.30.0-0.34.0), until uvicorn installs its own; Python prints it as the traceback's last line
STOPPING = rx(*COMMON_STOPPING.alternatives, r"^KeyboardInterrupt: terminated$")

#: `Engine core proc %s died unexpectedly, shutting down client.` (v1/engine/core_client.py, 0.10.2-0.15.0)
ENGINE_CORE_DIED = r"Engine core proc \S+ died unexpectedly"
#: `Worker proc %s died unexpectedly, shutting down executor.` (v1/executor/multiproc_executor.py, 0.8.5-0.25.0),
#: `... died unexpectedly (exit code: %s), ...` (0.30.0+). Exit code 0 is a worker's own SIGTERM handler (`raise
#: SystemExit()`, worker_main), -15/-2 the stop signal itself: a stop reaching every process at once (systemd), whose
#: own line follows, not a death
WORKER_DIED = r"Worker proc \S+ died unexpectedly(?! \(exit code: (?:0|-15|-2)\))"
#: the API server's monitor saw the engine core process end, unasked (v1/engine/core_client.py, 0.33.0-0.34.0:
#: `[shutdown] MPClient: engine core exited unexpectedly; starting cleanup`, logged at WARNING, then its cleanup's
#: `[shutdown]` lines): the engine died, not a requested stop, whatever the `[shutdown]` tag says
ENGINE_CORE_EXITED = r"engine core exited unexpectedly"

FATAL = rx(
    BAD_ARGS,
    r"EngineCore failed to start",
    r"Engine core initialization failed",
    r"WorkerProc failed to start",
    r"WorkerProc hit an exception",
    r"EngineCore encountered a fatal error",
    ENGINE_CORE_DIED,
    ENGINE_CORE_EXITED,
    WORKER_DIED,
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
    *KERNEL_FATAL,
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

#: where a start-up failure happened, by its frames, whatever phase the lines reached: capturing CUDA graphs
#: (gpu_model_runner.py capture_model, torch/cuda/graphs.py), else profiling memory after load (v1/worker/
#: gpu_worker.py determine_available_memory -> gpu_model_runner.py profile_run -> _dummy_run, whose forward runs
#: torch.compile: its `Dynamo bytecode transform time` / `Compiling a graph for` lines are graph-capture's markers;
#: V0: worker.py determine_num_available_blocks), which is the loading phase's last step, not graph capture
PLACED_BY_FRAMES = (
    Marker(Phase.GRAPH_CAPTURE, rx(r"in capture_model\b", r"in _capture_cudagraphs\b", r"graphs\.py.*capture_end",
                                   r"cudaErrorStreamCapture")),
    Marker(Phase.LOADING, rx(r"in (?:determine_available_memory|profile_run|determine_num_available_blocks)\b")),
)

CLASSIFIERS = (
    *COMMON_CLASSIFIERS,
    Classifier(FailureKind.CUDA_GRAPH, CAPTURE),
    Classifier(FailureKind.SCHEDULER_DIED, rx(
        ENGINE_CORE_DIED,
        ENGINE_CORE_EXITED,
        WORKER_DIED,
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


#: each node's own flags in a deployment over several nodes, long and short (engine/arg_utils.py): --node-rank -r
#: (0.15.0+), --data-parallel-start-rank -dpr (0.10.2+), --data-parallel-rank -dpn and --data-parallel-size-local
#: -dpl (0.9.2+), --headless. Not -dpa (--data-parallel-address): every node names the head's address
NODE_FLAGS = ("node-rank", "r", "headless", "data-parallel-start-rank", "dpr", "data-parallel-rank", "dpn",
              "data-parallel-size-local", "dpl")

#: the hints as no release in particular words them; each run's own come from `hints_for` and its release's facts
HINTS = hints_for(None)


THROUGHPUT_LINE = re.compile(r"Avg generation throughput: (?P<tps>[\d.]+) tokens/s")

VLLM = Preset(
    node_flags=NODE_FLAGS,
    name="vllm",
    markers=MARKERS,
    ready=READY,
    fatal=FATAL,
    classifiers=CLASSIFIERS,
    hint=HINTS,
    hints_for=hints_for,
    foreign_wordings=FOREIGN_WORDINGS,
    value_wordings={r"^args: Namespace\(": "args: {}"},  # vllm 0.8.5 entrypoints/cli/serve.py: the argparse Namespace
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
    placed_by_frames=PLACED_BY_FRAMES,
    wording_releases=WORDING_RELEASES,
    stopping=STOPPING,
    graph_evidence=CAPTURE,
    display_name="vLLM",
    metrics=METRICS,
    log_throughput=StatsLines(THROUGHPUT_LINE),
    memory_budget=MEMORY_BUDGET,
    metrics_hint=METRICS_HINT,
    detection=DETECTION,
    # every release states itself at start-up (the wheels 0.8.5 ... 0.34.0): each wording ends where the release
    # begins. The API server's first line, 0.8.5-0.11 (entrypoints/openai/api_server.py); from 0.15 the logo with
    # `version %s` (a formatter of vLLM's own) or, plain, `vLLM server version %s, serving model %s`
    # (log_version_and_model); the engine core's `Initializing a V1 LLM engine (v%s) with config: %s` (V0 in
    # 0.8.5-0.10); a headless node's `Launching vLLM (v%s) headless multiproc executor` (0.15+)
    version_line=rx(
        r"vLLM (?:API )?server version ",
        r"\u2580\u2584\u2580 \u2588\s+version ",
        r"Initializing a V[01] LLM engine \(v",
        r"Launching vLLM \(v",
    ),
    # `GET /version` -> {"version": VLLM_VERSION}, in every release since 0.8.5
    version_paths=("/version",),
)
