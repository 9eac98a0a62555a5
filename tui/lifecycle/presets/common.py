"""Failure wording shared by SGLang and vLLM: both run on PyTorch, NCCL and uvicorn, so OOM and NCCL text
is the same; each preset adds its own on top. Order matters: the first classifier that matches wins."""

from __future__ import annotations

import re

from tui.lifecycle.presets import Classifier, rx
from tui.model import FailureKind

OOM = rx(
    r"CUDA out of memory",
    r"OutOfMemoryError",
    r"CUDA error: out of memory",
    r"Not enough memory\. Please try to increase --mem-fraction-static",
    r"leave no GPU memory for the KV cache",
    r"No available memory for the cache blocks",
    r"is less than desired GPU memory utilization",
    r"KV cache is needed, which is larger than the available KV cache memory",
    r"CUBLAS_STATUS_ALLOC_FAILED",
)
NCCL = rx(
    r"NCCL error",
    r"\bnccl\w*Error\b",
    r"WorkNCCL\(",
    r"DistBackendError",
    r"ProcessGroupNCCL",
    r"Watchdog caught collective operation timeout",
    r"NCCL WARN",
    r"unhandled system error",
)
PORT = rx(
    r"[Aa]ddress already in use",
    r"\[Errno 98\]",
    r"[Pp]ort \d+ is (?:already )?in use",
    r"\bat \d+ is not available",  # sglang `{port_name} at {port} is not available`
)
CUDA_GRAPH = rx(
    r"Capture cuda graph failed",
    r"cuda_graph_runner",
    r"cudaErrorStreamCaptureInvalidated",
    r"operation failed due to a previous error during capture",
    r"graphs\.py.*capture_end",
    r"CUDA ?[Gg]raph",
    r"cudagraph",
)

#: argparse's last word on a command line it refuses (`launch_server.py: error: unrecognized arguments: ...`,
#: `vllm: error: argument --tensor-parallel-size/-tp: invalid int value: 'x'`), on stderr with no logger prefix
BAD_ARGS = r"^\S+: error: (?:unrecognized arguments:|argument -|the following arguments are required:)"
BAD_ARGS_HINT = ("The server refused its command line: a flag this version does not know, or a bad value (the "
                 "excerpt names it). Unset or fix it: `bringup restart <deployment> --unset NAME` or --set NAME=VALUE.")

EXIT_HINT = "The server exited without a recognised error: read the last lines of its log."
#: hints both servers give in the same words
COMMON_HINTS = {FailureKind.BAD_ARGS: BAD_ARGS_HINT, FailureKind.EXIT: EXIT_HINT}

COMMON_CLASSIFIERS: tuple[Classifier, ...] = (
    Classifier(FailureKind.BAD_ARGS, rx(BAD_ARGS, flags=re.MULTILINE)),  # an excerpt is many lines
    Classifier(FailureKind.OOM, OOM),
    Classifier(FailureKind.NCCL, NCCL),
    Classifier(FailureKind.PORT_IN_USE, PORT),
)

#: a clean shutdown under way: SGLang's SIGTERM handler, vLLM's `[shutdown]` lines (0.2x), uvicorn's own
#: (plain, or prefixed by the server's logger), vLLM V0's FastAPI line
STOPPING = rx(
    r"SIGTERM received\b",
    r"^\[shutdown\] ",
    r"\bINFO:\s+Shutting down$",
    r"Waiting for application shutdown",
    r"Application shutdown complete",
    r"Finished server process",
    r"Shutting down FastAPI HTTP server",
)

#: what SGLang's parent prints after a child failed (it then kills the tree): the consequence, never the cause
CONSEQUENCE = rx(
    r"Received sigquit from a child process",
    r"SIGQUIT received\. signum=",
    r"kill_process_tree called",
)

#: an access line for a generation that succeeded: the server answers generations, so it was ready
GENERATION_OK = r'"POST /(?:generate|v1/(?:chat/)?completions)(?:\?\S*)? HTTP/\d(?:\.\d)?" 200'

LOADING_FRAMES = rx(
    r"in (?:load_model|load_weights|init_torch_distributed|init_memory_pool|initialize_model_parallel|init_device"
    r"|determine_available_memory|profile_run|initialize_kv_cache|_init_executor|init_worker|_wait_for_scheduler_ready)\b",
    r"Free memory on device",
    r"No available memory for the cache blocks",
    r"in (?:raise_if_cache_size_invalid|initialize_cache)\b",
    r"Not enough memory\. Please try to increase --mem-fraction-static",
    r"scheduler died during initialization",
)
GRAPH_FRAMES = rx(r"cuda_graph_runner\.py.*in (?:__init__|capture)", r"Capture cuda graph failed",
                  r"in capture_model\b", r"graphs\.py.*capture_end")
WARMUP_FRAMES = rx(r"in _execute_server_warmup\b", r"warmup error", r"[Ss]erver warmup failed")

__all__ = ["BAD_ARGS", "BAD_ARGS_HINT", "COMMON_CLASSIFIERS", "COMMON_HINTS", "CONSEQUENCE", "CUDA_GRAPH", "EXIT_HINT",
           "GENERATION_OK", "NCCL", "OOM", "PORT", "STOPPING", "re"]

#: Wordings the presets match that no release of either server has in its own code, by the program that prints
#: them: the conformance tests check every other wording against the releases' format strings, and these against
#: not being a server's own (tests/unit/test_conformance.py). Each is what a library, the runtime or the OS prints.
#: (`CUDA out of memory`, `NCCL error`, `Address already in use` and `Uvicorn running on` are checked as the
#: servers' own: their code says them too.)
FOREIGN_WORDINGS: frozenset[str] = frozenset({
    # argparse, refusing a command line (Lib/argparse.py `error()`: "%(prog)s: error: %(message)s")
    BAD_ARGS,
    # PyTorch: its allocator's OOM (`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`), the CUDA
    # runtime's error strings as c10 raises them, cuBLAS's, and CUDA graph capture (torch/cuda/graphs.py)
    r"OutOfMemoryError", r"CUDA error: out of memory", r"CUBLAS_STATUS_ALLOC_FAILED",
    r"cudaErrorStreamCaptureInvalidated", r"cudaErrorStreamCapture",
    r"operation failed due to a previous error during capture", r"error during capture",
    r"graphs\.py.*capture_end", r"capture_end",
    # PyTorch's c10d / NCCL (ProcessGroupNCCL.cpp, the NCCL library's own `NCCL WARN` lines and error strings)
    r"\bnccl\w*Error\b", r"WorkNCCL\(", r"DistBackendError", r"ProcessGroupNCCL",
    r"Watchdog caught collective operation timeout", r"NCCL WARN", r"unhandled system error",
    # the C++ runtime (std::terminate) and the OS (EADDRINUSE, as Python's OSError words it)
    r"terminate called after throwing an instance of", r"\[Errno 98\]",
    # uvicorn (its startup, shutdown and access lines: both servers serve HTTP with it)
    r"Started server process", r"Waiting for application startup", r"Application startup complete",
    r"\bINFO:\s+Shutting down$", r"Waiting for application shutdown",
    r"Application shutdown complete", r"Finished server process",
    GENERATION_OK, r'"POST /v1/(?:chat/)?completions HTTP/1\.1" 200',
    r'"(?:GET|POST|PUT|DELETE) /\S* HTTP/\d(?:\.\d)?" [1-5]\d\d\b',
    # Python: a traceback's last line for vLLM's `raise KeyboardInterrupt("terminated")` (the message is the
    # server's, the `KeyboardInterrupt: ` line Python's), and traceback frames (`File ..., in capture_model`)
    r"^KeyboardInterrupt: terminated$", r"in capture_model\b",
})
