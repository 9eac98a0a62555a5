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

#: argparse's last word on a command line it refuses, on stderr with no logger prefix: `%(prog)s: error: %(message)s`
#: (Lib/argparse.py `error()`). PROG is the parser's program, one word or several: `launch_server.py` (SGLang up to
#: 0.5.9, `python -m sglang.launch_server`: argparse's default, argv[0]'s name), `sglang serve` (SGLang 0.5.10+, the
#: facts' `prog`: srt/server_args.py prepare_server_args `ArgumentParser(prog="sglang serve")`, also under `python -m
#: sglang.launch_server`), `vllm` (the top parser: unrecognized arguments) and `vllm serve` (its `serve` subparser,
#: prog "vllm" + " serve": a bad value), `api_server.py`. Any PROG is taken, and none: SGLang's diffusion path raises
#: `SystemExit(f"error: unrecognized arguments: ...")`. The messages are argparse's own (3.9-3.14): an unknown flag,
#: an abbreviation matching several, a bad value of one argument (`invalid int value`, `invalid choice`, `expected
#: one argument`, an ArgumentTypeError's words), a missing required one
BAD_ARGS = (r"^(?:[^\s:]+(?: [^\s:]+){0,3}: )?error: (?:unrecognized arguments:|ambiguous option:|argument \S+: |"
            r"the following arguments are required:|one of the arguments .+ is required)")
BAD_ARGS_HINT = ("The server refused its command line: a flag this version does not know, or a bad value (the "
                 "excerpt names it). Unset or fix it: `bringup restart <deployment> --unset NAME` or --set NAME=VALUE.")
_REFUSAL = re.compile(BAD_ARGS + r"\s*(?P<rest>.*)$", re.MULTILINE)
_UNKNOWN = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)(?:=\S*)?")


def bad_args_hint(excerpt: str) -> str:
    """The bad-args hint naming the flag argparse refused (the last refusal in the excerpt), so the operator need
    not read the usage dump: `--x` unknown to this release, `--tp` given a value it does not take."""
    refusals = list(_REFUSAL.finditer(excerpt))
    if not refusals:
        return BAD_ARGS_HINT
    m = refusals[-1]
    text, rest = m.group(0), m["rest"]
    if "unrecognized arguments:" in text:
        flags = _UNKNOWN.findall(rest)
        if not flags:
            return BAD_ARGS_HINT
        shown = ", ".join(f"`{f}`" for f in flags[:4])
        unset = " ".join(f"--unset {f.lstrip('-')}" for f in flags[:4])
        are = "is not a flag" if len(flags) == 1 else "are not flags"
        return (f"The server refused its command line: {shown} {are} this release knows (removed, renamed or "
                f"misspelled: `_` for `-`). Remove or rename it: "
                f"`bringup restart <deployment> {unset}`.")
    if "ambiguous option:" in text:
        flag = rest.split(" ", 1)[0].split("=", 1)[0]
        matches = rest.split(" could match ", 1)[1] if " could match " in rest else ""
        return (f"The server refused its command line: `{flag}` is no flag of this release, only the start of "
                f"several ({matches}): it was removed or renamed. Use one of those, or "
                f"`bringup restart <deployment> --unset {flag.lstrip('-')}`.")
    arg = re.search(r"argument (\S+): ", text)
    if arg:
        spellings = arg[1].split("/")
        flag = next((x for x in spellings if x.startswith("--")), spellings[0])
        return (f"The server refused its command line: {flag} was given a value it does not take ({rest.strip()}). "
                f"Fix it: `bringup restart <deployment> --set {flag.lstrip('-')}=VALUE`, or --unset it.")
    return (f"The server refused its command line: {text.split(': error: ', 1)[-1]} {rest.strip()}. Add or fix "
            f"it: `bringup restart <deployment> --set NAME=VALUE`.")


EXIT_HINT = "The server exited without a recognised error: read the last lines of its log."


def kernel_hint(backends: tuple[str, ...]) -> str:
    """A kernel missing for this GPU: the fix is always one of a family (a build for its architecture, another
    quantization, another backend); `backends`: the backend flags this release takes, as `--name`."""
    other = f"another quantization (--quantization) or backend ({', '.join(backends)})" if backends else \
        "another quantization (--quantization)"
    return ("A GPU kernel the server needs is not built for this GPU's architecture (compute capability): install a "
            "build of the server and its kernels (PyTorch, FlashInfer) compiled for it (TORCH_CUDA_ARCH_LIST), or "
            f"choose {other} whose kernels this GPU has.")

#: a GPU kernel the server needs is not built for this GPU, whichever layer says so: the CUDA runtime (`no kernel
#: image is available for execution on the device`, as PyTorch's c10 raises it), vLLM's compiled ops (csrc/ TORCH_CHECK:
#: `No compiled cutlass_scaled_mm for a compute capability less than CUDA device capability: 75`, and the NotImplemented
#: text its custom-op wrapper adds), CUTLASS's status string (`Error Internal`) as FlashInfer's FP4 GEMM runner and
#: vLLM's CUTLASS_CHECK report it, a toolchain without the GPU's architecture (ptxas, FlashInfer's JIT), and the PTX
#: and illegal-instruction errors of a kernel built for another architecture
#: the kernel wordings that end a start-up or a serving engine on their own (never a warning's words)
KERNEL_FATAL = (
    r"no kernel image is available for execution on the device",
    r"No compiled \w+ for (?:a )?compute capability",
    r"Failed to (?:initialize|run) cutlass\b",
    r"ptxas fatal\s*: Value '\w+' is not defined for option 'gpu-name'",
)
KERNEL = rx(
    r"no kernel image is available for execution on the device",
    r"cudaErrorNoKernelImageForDevice",
    r"No compiled \w+ for (?:a )?compute capability",
    r"current device does not support this kernel",
    r"\bError Internal\b",
    r"Failed to (?:initialize|run) cutlass\b",
    r"cutlass::Status::kSuccess",
    r"ptxas fatal\s*: Value '\w+' is not defined for option 'gpu-name'",
    r"No supported CUDA architectures found",
    r"provided PTX was compiled with an unsupported toolchain",
    r"cudaErrorUnsupportedPtxVersion",
    r"is not compatible with the current PyTorch installation",
)
#: hints both servers give in the same words
COMMON_HINTS = {FailureKind.BAD_ARGS: BAD_ARGS_HINT, FailureKind.EXIT: EXIT_HINT}

COMMON_CLASSIFIERS: tuple[Classifier, ...] = (
    Classifier(FailureKind.BAD_ARGS, rx(BAD_ARGS, flags=re.MULTILINE)),  # an excerpt is many lines
    Classifier(FailureKind.OOM, OOM),
    Classifier(FailureKind.KERNEL, KERNEL),
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
           "GENERATION_OK", "KERNEL", "KERNEL_FATAL", "NCCL", "OOM", "PORT", "STOPPING", "bad_args_hint", "re"]

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
    # a kernel not built for this GPU: the CUDA runtime's words (through PyTorch), vLLM's compiled ops (csrc/, C++
    # TORCH_CHECK and its custom-op wrapper: not in the Python strings the facts hold), CUTLASS's status string and
    # FlashInfer's FP4 GEMM runner, NVIDIA's ptxas, FlashInfer's JIT, PyTorch's capability check
    r"no kernel image is available for execution on the device", r"cudaErrorNoKernelImageForDevice",
    r"No compiled \w+ for (?:a )?compute capability", r"current device does not support this kernel",
    r"\bError Internal\b", r"Failed to (?:initialize|run) cutlass\b", r"cutlass::Status::kSuccess",
    r"ptxas fatal\s*: Value '\w+' is not defined for option 'gpu-name'", r"No supported CUDA architectures found",
    r"provided PTX was compiled with an unsupported toolchain", r"cudaErrorUnsupportedPtxVersion",
    r"is not compatible with the current PyTorch installation",
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
