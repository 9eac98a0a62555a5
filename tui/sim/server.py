"""The reference server: a simulated SGLang 0.5.x deployment (``python -m sglang.launch_server`` look-alike).

``--release`` picks the release it imitates (default the newest): its flags, arguments line, wordings, metric
labels and routes, from the table in releases.py. Its command line is args.py's, its HTTP surface http_api.py's.

It lets the console be built and tested without GPUs: a real process with a real HTTP server that
prints SGLang's startup and serving lines with realistic timing, holds simulated GPU memory (gpus.py) that is
released only some time after it exits, and reproduces real bring-up failures (DFLASH + CUDA graphs crash, OOM
on a fast restart, a stale process answering /v1/models, a hang, a crash while serving). A test instrument,
not the product. Stdlib only, Python 3.9+: the directory is copied alone to remote test hosts.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import signal
import sys
import threading
import time
import urllib.request
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from . import gpus, nodes
    from .args import build_parser, parse_args
    from .http_api import CONTEXT_LEN, Handler, HTTPServer, Served
    from .releases import Release
except ImportError:
    import gpus  # type: ignore[no-redef]
    import nodes  # type: ignore[no-redef]
    from args import build_parser, parse_args  # type: ignore[no-redef]
    from http_api import CONTEXT_LEN, Handler, HTTPServer, Served  # type: ignore[no-redef]
    from releases import Release  # type: ignore[no-redef]

__all__ = ["CONTEXT_LEN", "Handler", "Sim", "build_parser", "main", "parse_args", "traceback_text"]

CAP_GIB = gpus.CAPACITY_MIB / 1024  # 139.81: what torch calls the total capacity of an H200
SP = "/usr/local/lib/python3.12/dist-packages"
KV_BYTES_PER_TOKEN = 70272  # MLA: (512 + 64) * 2 bytes * 61 layers
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIGQUIT_CHILD = "Received sigquit from a child process. It usually means the child failed."
# traceback frames: path under site-packages | line | function | code
TB_INIT = """sglang/srt/managers/scheduler.py|3315|run_scheduler_process|scheduler = Scheduler(
sglang/srt/managers/scheduler.py|412|__init__|self.init_model_worker()
sglang/srt/managers/scheduler.py|631|init_model_worker|self.tp_worker = TpModelWorker(
sglang/srt/managers/tp_worker.py|246|__init__|self._init_model_runner()
sglang/srt/managers/tp_worker.py|327|_init_model_runner|self._model_runner = ModelRunner(
sglang/srt/model_executor/model_runner.py|402|__init__|self.initialize(min_per_gpu_memory)
"""
TB_LOAD = TB_INIT + """sglang/srt/model_executor/model_runner.py|489|initialize|self.load_model()
sglang/srt/model_executor/model_runner.py|1012|load_model|self.model = get_model(
sglang/srt/model_loader/loader.py|681|load_model|self.load_weights_and_postprocess(
sglang/srt/model_loader/loader.py|689|load_weights_and_postprocess|model.load_weights(weights)
sglang/srt/models/deepseek_v2.py|3620|load_weights|weight_loader(param, loaded_weight)
sglang/srt/layers/moe/fused_moe_triton/layer.py|733|weight_loader|loaded_weight = loaded_weight.cuda()
"""
TB_KV = TB_INIT + "sglang/srt/model_executor/model_runner.py|520|initialize|self.init_memory_pool(min_mem)\n"
TB_REPLAY = """sglang/srt/managers/scheduler.py|3331|run_scheduler_process|scheduler.event_loop_overlap()
torch/utils/_contextlib.py|120|decorate_context|return func(*args, **kwargs)
sglang/srt/managers/scheduler.py|1162|event_loop_overlap|batch_result = self.run_batch(batch)
sglang/srt/managers/scheduler.py|2508|run_batch|batch_result = self.model_worker.forward_batch_generation(
sglang/srt/speculative/dflash_worker_v2.py|715|forward_batch_generation|verify_output = self.verify(batch)
sglang/srt/speculative/dflash_worker_v2.py|1507|verify|out = self.target_worker.forward_batch_generation(
sglang/srt/managers/tp_worker.py|442|forward_batch_generation|logits_output = self.model_runner.forward(
sglang/srt/model_executor/model_runner.py|2410|forward|output = self._forward_raw(
sglang/srt/model_executor/model_runner.py|2467|_forward_raw|ret = self.graph_runner.replay(
sglang/srt/model_executor/cuda_graph_runner.py|1021|replay|self.graphs[self.bs].replay()
torch/cuda/graphs.py|88|replay|super().replay()
"""
ILLEGAL_ACCESS = """torch.AcceleratorError: CUDA error: an illegal memory access was encountered
Search for `cudaErrorIllegalAddress' in \
https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below \
might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""


NCCL_ERROR = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
              ":3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3\n"
              "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.")
NCCL_ABORTED = ("torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0. Original reason for "
                "failure was: NCCL error: remote process exited or there was a network error")


class _Stop(BaseException):
    """Raised in the main thread by the SIGTERM/SIGINT handler to unwind whatever phase is running."""


def traceback_text(frames: str, final: str) -> str:
    """A Python traceback in the real layout, so the console's multi-line error capture is exercised."""
    out = ["Traceback (most recent call last):"]
    for fr in frames.strip().splitlines():
        path, line, func, code = fr.split("|", 3)
        out += [f'  File "{SP}/{path}", line {line}, in {func}', f"    {code}"]
    return "\n".join([*out, final])


class Log:
    """SGLang's ``[date time(.ms)( TPr)( EPr)] msg`` lines on stdout, flushed per line; bars on stderr."""

    def __init__(self, tp: int, ep: int, first: int = 0, count: int | None = None) -> None:
        self.tp, self.ep = tp, ep
        #: this node's TP ranks: all of them on one node, its share on each of several
        self.first, self.count = first, tp if count is None else count
        self.ms = os.environ.get("SGLANG_LOG_MS") == "1"
        self.lock = threading.RLock()
        self.quiet = False
        #: `--log-level` above info: the routine lines (batches, access lines) are not printed, as SGLang's logger
        #: drops them; warnings, errors and a crash's lines still are
        self.routine = True

    def line(self, msg: str, rank: int | None = None) -> None:
        t = time.time()
        ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        ts += f".{int(t * 1000) % 1000:03d}" if self.ms else ""
        if rank is not None:
            ts += f" TP{rank}" if self.tp > 1 else ""
            ts += f" EP{rank // (self.tp // self.ep)}" if self.ep > 1 else ""
        with self.lock:
            if not self.quiet:
                sys.stdout.write(f"[{ts}] {msg}\n")
                sys.stdout.flush()

    def info(self, msg: str, rank: int | None = None) -> None:
        """A routine line (a batch, an access line): printed at `--log-level info` and below only."""
        if self.routine:
            self.line(msg, rank)

    def ranks(self, msg: str) -> None:
        for r in range(self.first, self.first + self.count):
            self.line(msg, r)

    def bar(self, desc: str, n: int, total: int, t0: float, shards: bool) -> None:
        """A tqdm redraw: ``\\r`` before each update and ``\\n`` after the last, as tqdm does on a TTY."""
        el = time.time() - t0
        rate = n / el if el > 0 and n else 0.0

        def mmss(s: float) -> str:
            return f"{int(s) // 60:02d}:{int(s) % 60:02d}"

        tail = f"{n}/{total} [{mmss(el)}<" + (f"{mmss((total - n) / rate)}, {rate:5.2f}it/s]" if rate
                                               else "?, ?it/s]")
        pct = 100 * n // total
        bar = f" Completed | {tail}" if shards else f"|{'█' * (pct // 10):10s}| {tail}"
        with self.lock:
            if not self.quiet:
                sys.stderr.write(f"\r{desc}: {pct:3d}%{bar}" + ("\n" if n >= total else ""))
                sys.stderr.flush()


class Req:
    """One generation in the simulated scheduler (an HTTP request or a background ``--sim-load`` one)."""

    def __init__(self, prompt: int, max_new: int, stream: bool = False) -> None:
        self.prompt, self.max_new, self.generated, self.acc = prompt, max_new, 0, 0.0
        self.stream = stream
        #: its speculative verify forwards: one per accept length's worth of its tokens
        self.verifies = 0.0
        self.created = time.time()
        self.ready_at = 0.0
        self.first_token_at: float | None = None
        self.done = threading.Event()


class Sim:
    """The simulated deployment: bring-up (main thread), scheduler loop, HTTP server and GPU holder."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a, self.scale, self.pid = a, a.time_scale, os.getpid()
        per_node = a.tp_size // a.nnodes
        self.log = Log(a.tp_size, a.ep_size, a.node_rank * per_node, per_node)
        self.log.routine = a.log_level.lower() in ("debug", "info")
        self.rank0 = a.node_rank * per_node  # this node's first TP rank
        self.head: nodes.Head | None = None
        self.worker: nodes.Worker | None = None
        self.peer_lost_at: float | None = None
        self.rng = random.Random(a.sim_seed)
        self.algo: str | None = a.speculative_algorithm
        self.state = "starting"  # starting -> warmup -> ready -> stopping | stale
        self.used_gib = self.others_gib = 0.0
        self.dying = self.stop_requested = False
        self.httpd: HTTPServer | None = None
        self.is_kimi = "kimi" in a.model_path.lower()
        self.weights_gib = 72.24 if self.is_kimi else 15.11
        self.draft_gib = {None: 0.0, "NGRAM": 0.0, "DFLASH": 0.81}.get(self.algo, 1.32)
        self.graph_gib = (1.44 + (0.35 if self.draft_gib else 0.0)) if a.graphs else 0.0
        self.kv_gib = CAP_GIB * a.mem_fraction_static - (0.53 + self.weights_gib + self.draft_gib)
        self.max_tokens = 0
        self.max_running = min(256, a.graph_max_bs) if a.graphs else 256
        self.rel: Release = a.rel
        self.cond = threading.Condition()  # guards everything below
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.background: list[Req] = []
        #: the scheduler's counters, bumped every step (realtime_tokens_total) ...
        self.c = {"decode": 0, "prefill": 0}
        #: ... and the tokenizer's, bumped when a request finishes, by its is_streaming ("true"/"false"): prompt and
        #: generated tokens, requests, verify forwards (spec_verify_calls_total, no is_streaming in any release)
        self.fin: dict[str, dict[str, float]] = {"prompt": {}, "gen": {}, "reqs": {}}
        self.verify_calls = 0
        #: verify forwards of every step since start (`avg_spec_accept_length`: decode tokens over these)
        self.verify_steps = 0.0
        self.ttft: dict[str, list[int]] = {}
        self.ttft_sum: dict[str, float] = {}
        self.gen_throughput = self.accept_len = self.accept_rate = 0.0
        self.noise = 1.0
        self.streamed = 0  # streamed chat requests received (--sim-crash-after-requests)
        self.answered = threading.Event()  # a generation was answered (crash-while-serving waits for one)
        self.replayed, self.jit_pending = False, True
        gpus.prune(a.sim_state_dir)
        self.holder = gpus.Holder(a.sim_state_dir, a.gpu_ids, a.sim_release_delay * self.scale)
        atexit.register(self.holder.mark_exited)

    def sglang_args(self) -> dict[str, Any]:
        """The resolved SGLang arguments (what ServerArgs would hold), without the sim's own."""
        return {k: v for k, v in vars(self.a).items() if not k.startswith("sim_") and k not in (
            "time_scale", "scenario", "release", "rel", "gpu_ids", "graphs", "graph_backend", "graph_max_bs")}

    def args_line(self) -> str:
        """`server_args=ServerArgs(k=v, ...)` (a dataclass's repr), or from 0.5.20 `server_args={'k': v, ...}`."""
        args = self.sglang_args()
        if self.rel.args_line == "dict":
            return f"server_args={args!r}"
        return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds * self.scale)

    def avail(self) -> float:
        return CAP_GIB - self.others_gib - self.used_gib

    def set_mem(self, used_gib: float, util: int) -> None:
        self.used_gib = used_gib
        self.holder.update({g: int(used_gib * 1024) for g in self.a.gpu_ids}, util)

    def others(self) -> dict[int, list[dict[str, Any]]]:
        """Processes of other holders on each of our GPUs (memory still held, alive or being released)."""
        _, procs = gpus.read_state(self.a.sim_state_dir, None, max(self.a.gpu_ids) + 1, exclude_pid=self.pid)
        return {g: [p for p in procs if p["gpu"] == g] for g in self.a.gpu_ids}

    def die(self, rank: int | None, exc: str | None, parent: str) -> None:
        """SGLang's fatal path: the scheduler traceback, the parent's SIGQUIT line, a tree kill by SIGKILL."""
        with self.log.lock:
            if self.dying:
                return
            self.dying, self.log.quiet = True, False
            if exc:
                self.log.line(f"Scheduler hit an exception: {exc}", rank)
            self.log.line(parent)
            self.log.line(f"kill_process_tree called: parent_pid={self.pid}, include_parent=True, "
                          f"pid={self.pid}")
            sys.stderr.flush()
        self.holder.mark_exited()
        os.kill(self.pid, signal.SIGKILL)

    def count_stream(self) -> None:
        """--sim-crash-after-requests: the N-th streamed chat request ends this run (once per state dir), while
        the requests before it are in flight: a crash in the middle of a benchmark cell."""
        n = self.a.sim_crash_after_requests
        if not n:
            return
        marker = os.path.join(self.a.sim_state_dir, "crashed-after-requests")
        with self.cond:
            self.streamed += 1
            if self.streamed < n or os.path.exists(marker):
                return
            os.makedirs(self.a.sim_state_dir, exist_ok=True)
            with open(marker, "w") as f:
                f.write(f"{self.pid}\n")

        def crash() -> None:
            time.sleep(0.2 * self.scale)
            self.log.line(f"Subprocess scheduler_3 (pid={self.pid + 4}) crashed with exit code -9. "
                          "Triggering SIGQUIT for cleanup...")
            self.die(None, None, "SIGQUIT received. signum=3, frame=None. It usually means one child failed.")
        threading.Thread(target=crash, daemon=True).start()

    # ---- bring-up ------------------------------------------------------------------------------------
    def load(self, what: str, gib: float, shards: int, seconds: float) -> float:
        """Weights with a shard bar and a gradual memory ramp; may OOM, or (hang-loading) stop forever."""
        t0, base, free0 = time.time(), self.used_gib, self.avail()
        for n in range(shards + 1):
            if what == "target" and self.a.scenario == "hang-loading" and n >= shards * 0.4:
                while True:  # a hung read/collective: no output, no memory change, until killed
                    time.sleep(3600)
            if gib * n / shards > free0 - 0.5:
                self.oom(base + gib * (n - 1) / shards, free0 - gib * (n - 1) / shards)
            self.set_mem(base + gib * n / shards, self.rng.randint(5, 20))
            if what == "target":
                self.log.bar("Loading safetensors checkpoint shards", n, shards, t0, True)
            if n < shards:
                self.sleep(seconds / shards)
        return time.time() - t0

    def oom(self, own_gib: float, free_gib: float) -> None:
        """The CUDA OOM of a start while another process (often our predecessor) still holds the GPU."""
        others = self.others()
        rank, gpu = max(enumerate(self.a.gpu_ids),
                        key=lambda rg: sum(p["used_memory"] for p in others[rg[1]]))
        procs = "".join(f"Process {p['pid']} has {p['used_memory'] / 1024:.2f} GiB memory in use. "
                        for p in others[gpu])
        final = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU {gpu} has a "
                 f"total capacity of {CAP_GIB:.2f} GiB of which {max(0.0, free_gib):.2f} GiB is free. {procs}"
                 f"Including non-PyTorch memory, this process has {own_gib:.2f} GiB memory in use. Of the "
                 f"allocated memory {max(0.0, own_gib - 0.53):.2f} GiB is allocated by PyTorch, and 0.02 GiB "
                 "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
                 "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
                 "documentation for Memory Management  "
                 "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
        self.die(rank, traceback_text(TB_LOAD, final), SIGQUIT_CHILD)

    def capture(self, role: str, gib: float, seconds: float) -> None:
        a, L = self.a, self.log
        kind = "verify" if role == "target" and self.algo else "decode"
        per_req = a.speculative_num_draft_tokens if kind == "verify" else (
            (a.speculative_eagle_topk or 1) if role == "draft" else 1)
        bss = [b for b in [1, 2, 4, 8, *range(16, 257, 8)] if b <= a.graph_max_bs]
        at_end = role == "target" and self.rel.target_bs_at_end  # the draft's sizes open its capture
        bs_txt = "" if at_end else f"bs={bss}, "
        L.ranks(f"Capture {role} {kind} CUDA graph begin. backend={a.graph_backend}, "
                f"{self.rel.tokens_key}={per_req}, {bs_txt}avail mem={self.avail():.2f} GB")
        t0, base = time.time(), self.used_gib
        for i, bs in enumerate(reversed(bss)):
            self.set_mem(base + gib * (i + 1) / len(bss), self.rng.randint(30, 50))
            L.bar(f"Capturing batches (bs={bs} avail_mem={self.avail():.2f} GB)", i + 1, len(bss), t0, False)
            self.sleep(seconds / len(bss))
        bs_txt = "" if bs_txt else f"bs={bss}, "
        L.ranks(f"Capture {role} {kind} CUDA graph end. {bs_txt}elapsed={time.time() - t0:.2f} s, "
                f"mem usage={gib:.2f} GB, avail mem={self.avail():.2f} GB.")

    def bringup(self) -> None:
        """The startup timeline of SGLang 0.5.x: at --time-scale 1, ~27 s with graphs, ~19 s without."""
        a, L = self.a, self.log
        L.line(self.args_line())
        self.sleep(1.0)
        L.ranks(self.rel.init_begin)
        t0 = time.time()
        self.join_nodes()
        self.sleep(1.5)
        self.set_mem(0.53, 2)
        for text in (self.rel.init_end, self.rel.init_after):
            if text:
                L.ranks(text.format(elapsed=time.time() - t0, mem=self.used_gib))
        self.sleep(0.5)
        self.others_gib = max(sum(p["used_memory"] for p in ps) for ps in self.others().values()) / 1024
        quant = "quant=compressed-tensors, " if self.is_kimi else "dtype=torch.bfloat16, "
        loads = [("target", self.weights_gib, 64, 12.0,
                  "KimiK25ForConditionalGeneration" if self.is_kimi else "LlamaForCausalLM")]
        if self.draft_gib:
            loads.append(("draft", self.draft_gib, 2, 1.5, {"DFLASH": "DFlashDraftModel", "EAGLE3":
                          "LlamaForCausalLMEagle3"}.get(self.algo or "", "DeepseekV3ForCausalLMNextN")))
        for what, gib, shards, secs, klass in loads:
            L.ranks(f"Load weight begin. avail mem={self.avail():.2f} GB")
            el = self.load(what, gib, shards, secs)
            for r in range(self.rank0, self.rank0 + len(a.gpu_ids)):
                L.line(f"Load weight end. elapsed={el * (1 + 0.004 * r):.2f} s, type={klass}, {quant}"
                       f"avail mem={self.avail():.2f} GB, mem usage={gib:.2f} GB.", r)
            if what == "draft" and self.algo == "DFLASH":
                L.ranks(f"Initialized DFLASH draft runner. attention_backend=flashinfer, "
                        f"model={a.speculative_draft_model_path}, "
                        f"block_size={a.speculative_num_draft_tokens}, draft_window_size=None, "
                        "compact_cache=False")
        self.sleep(1.0)
        kv = min(self.kv_gib, self.avail() - 0.15 - self.graph_gib - 1.0)
        if kv < 1.0:
            final = ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                     f"Current value: mem_fraction_static={a.mem_fraction_static}")
            self.die(0, traceback_text(TB_KV, final), SIGQUIT_CHILD)
        self.max_tokens = int(kv * 2**30 / KV_BYTES_PER_TOKEN)
        self.set_mem(self.used_gib + kv + 0.15, 10)
        L.ranks(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {self.max_tokens}, "
                f"KV size: {kv:.2f} GB")
        L.ranks(f"Memory pool end. avail mem={self.avail():.2f} GB")
        if a.graphs:
            self.capture("target", 1.44, 6.0 if self.draft_gib else 8.0)
            if self.draft_gib:
                self.capture("draft", 0.35, 2.0)
        if self.algo == "DFLASH":
            L.ranks("DFLASH draft runner ready. mask_token=<|mask|>, mask_token_id=163838")
        self.set_mem(self.used_gib, 0)
        L.line(f"max_total_num_tokens={self.max_tokens}, chunked_prefill_size=8192, "
               f"max_prefill_tokens=16384, max_running_requests={self.max_running}, "
               f"context_len={CONTEXT_LEN}, "
               f"available_gpu_mem={self.avail():.2f} GB", self.rank0)

    def serve(self) -> int:
        """Bind only now (connection refused before), warm up with real requests to ourselves, then serve."""
        a, L = self.a, self.log
        try:
            served: Served = self  # mypy checks here that the Sim is what the HTTP surface needs
            httpd = HTTPServer((a.host, a.port), type("BoundHandler", (Handler,), {"sim": served}))
        except OSError as e:
            L.line(f"ERROR:    [Errno {e.errno}] error while attempting to bind on address "
                   f"('{a.host}', {a.port}): {(e.strerror or '').lower()}")
            self.holder.mark_exited()
            return 1
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.httpd = httpd
        threading.Thread(target=self.scheduler_loop, daemon=True).start()
        for m in (f"Started server process [{self.pid}]", "Waiting for application startup.",
                  "Application startup complete.",
                  f"Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)"):
            L.line(f"INFO:     {m}")
        if not a.skip_server_warmup:
            self.state = "warmup"
            host = "127.0.0.1" if a.host in ("0.0.0.0", "", "::") else a.host
            base = f"http://{f'[{host}]' if ':' in host else host}:{a.port}"
            self.sleep(1.0)
            try:
                urllib.request.urlopen(base + "/model_info", timeout=600).read()
                body = json.dumps({"text": "The capital city of France is",
                                   "sampling_params": {"temperature": 0, "max_new_tokens": 8}}).encode()
                req = urllib.request.Request(base + "/generate", body, {"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=600).read()
            except OSError as e:
                self.die(None, None, f"Initialization failed. warmup error: {e!r}")
        self.answered.clear()  # the server's own warmup generation is no one's answer
        self.state = "ready"
        L.line("The server is fired up and ready to roll!")
        with self.cond:
            self.background = [self.submit_locked(self.rng.randint(200, 1200), self.rng.randint(150, 500))
                               for _ in range(a.sim_load)]
        crash_at = None
        if a.scenario == "crash-while-serving":
            # "while serving" is a fact, not a time: the crash comes after the server has answered a generation
            # (whoever watches it has seen it ready), never before on a slow machine
            self.answered.wait()
            crash_at = time.time() + 10 * self.scale
        if a.scenario == "log-burst":
            threading.Thread(target=self.burst, args=(a.sim_burst_after,), daemon=True).start()
        while True:
            time.sleep(0.05)
            if crash_at and time.time() >= crash_at:
                L.line(f"Subprocess scheduler_3 (pid={self.pid + 4}) crashed with exit code -9. "
                       "Triggering SIGQUIT for cleanup...")
                self.die(None, None,
                         "SIGQUIT received. signum=3, frame=None. It usually means one child failed.")

    # ---- several nodes -------------------------------------------------------------------------------
    def join_nodes(self) -> None:
        """Init torch distributed across nodes: the head waits for every worker, a worker for the head."""
        a = self.a
        if a.nnodes == 1:
            return
        if a.node_rank == 0:
            self.head = nodes.Head(a.dist_init_addr, a.nnodes, self.node_lost)
            self.head.wait_joined()
        else:
            self.worker = nodes.Worker(a.dist_init_addr, a.node_rank, self.head_lost)
            self.worker.join()

    def node_lost(self, rank: int) -> None:
        """A worker left: the head's next collective never completes. Nothing is printed until the watchdog fires
        (a real head is stuck inside NCCL), and nothing is served meanwhile."""
        if self.peer_lost_at is not None or self.stop_requested:
            return
        self.peer_lost_at = time.time()

        def watchdog() -> None:
            time.sleep(self.a.watchdog_timeout * self.scale)
            if self.stop_requested or self.dying:
                return
            self.log.line(f"Scheduler watchdog timeout (self.watchdog_timeout={self.a.watchdog_timeout:g}, "
                          "self.soft=False)", self.rank0)
            self.die(None, None, SIGQUIT_CHILD)
        threading.Thread(target=watchdog, daemon=True).start()

    def head_lost(self) -> None:
        """The head is gone: a worker's next collective fails with an NCCL error (unless it is stopping too)."""
        time.sleep(1.0 * self.scale)  # a deployment being stopped stops its workers too: give that a moment
        if self.stop_requested or self.dying:
            return
        self.die(self.rank0, traceback_text(TB_REPLAY, NCCL_ABORTED), SIGQUIT_CHILD)

    def serve_as_worker(self) -> int:
        """A worker node serves no HTTP: it reports its bring-up done and runs its share of every forward."""
        assert self.worker is not None
        self.state = "ready"
        self.worker.ready()
        self.set_mem(self.used_gib, 0)
        crash_at = time.time() + self.a.sim_crash_after * self.scale if self.a.sim_crash_after else None
        while True:
            time.sleep(0.05)
            if crash_at and time.time() >= crash_at:
                self.die(self.rank0, traceback_text(TB_REPLAY, NCCL_ERROR), SIGQUIT_CHILD)

    def burst(self, after: float) -> None:
        """log-burst: decode lines at --sim-burst-rate for --sim-burst-seconds, each numbered and stamped with
        the time it was written (`burst-seq: N at EPOCH`) so a reader can tell how far behind it is."""
        time.sleep(after)
        rate, seconds, L = self.a.sim_burst_rate, self.a.sim_burst_seconds, self.log
        t0 = time.time()
        seq = 0
        while (now := time.time()) - t0 < seconds:
            due = int((now - t0) * rate)
            ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
            chunk = "".join(f"[{ts} TP0] Decode batch, burst-seq: {i} at {now:.6f}, #running-req: 4, #token: "
                            f"{9000 + i % 500}, token usage: 0.01, cuda graph: True, gen throughput (token/s): "
                            "231.20, #queue-req: 0\n" for i in range(seq, due))
            seq = due
            with L.lock:
                sys.stdout.write(chunk)
                sys.stdout.flush()
            time.sleep(0.005)
        L.line(f"burst done: {seq} lines in {time.time() - t0:.2f} s")

    def stop(self, signum: int) -> int:
        """SIGTERM/SIGINT: stop accepting, exit 0 within ~0.5 s; stale-health lingers answering /v1/models."""
        t0 = time.time()
        if self.httpd:
            name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
            self.log.line(f"{name} received. signum={signum} frame=None. "
                          "Draining requests and shutting down...")
            if self.a.scenario == "stale-health":
                self.state, self.log.quiet = "stale", True
                self.sleep(8.0)
            else:
                self.state = "stopping"
                self.httpd.shutdown()
                self.httpd.server_close()
                for m in ("Shutting down", "Waiting for application shutdown.",
                          "Application shutdown complete.", f"Finished server process [{self.pid}]"):
                    self.log.line(f"INFO:     {m}")
        time.sleep(max(0.0, 0.5 * self.scale - (time.time() - t0)))
        self.holder.mark_exited()
        return 0

    def run(self) -> int:
        def on_signal(signum: int, frame: Any) -> None:
            if not self.stop_requested and not self.dying:
                self.stop_requested = True
                raise _Stop(signum)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        try:
            self.bringup()
            if self.worker is not None:
                return self.serve_as_worker()
            if self.head is not None:
                self.head.wait_ready()
            return self.serve()
        except _Stop as e:
            return self.stop(int(e.args[0]))

    # ---- scheduler -----------------------------------------------------------------------------------
    def submit_locked(self, prompt: int, max_new: int, stream: bool = False) -> Req:
        r = Req(prompt, max_new, stream)
        self.waiting.append(r)
        self.cond.notify_all()
        return r

    def submit(self, prompt: int, max_new: int, stream: bool = False) -> Req:
        with self.cond:
            return self.submit_locked(prompt, max_new, stream)

    def finished(self, r: Req) -> None:
        """The tokenizer process's count of a finished request (`observe_one_finished_request`): its prompt and
        generated tokens and the request itself, by is_streaming, and its verify forwards."""
        key = "true" if r.stream else "false"
        for name, n in (("prompt", r.prompt), ("gen", r.generated), ("reqs", 1)):
            self.fin[name][key] = self.fin[name].get(key, 0) + n
        if self.algo and r.generated:
            self.verify_calls += max(1, round(r.verifies))

    def new_window(self) -> None:
        """Noise and accept length are drawn per log window, so the printed numbers move like real ones."""
        if self.algo:
            mean = {"DFLASH": 3.2, "NGRAM": 1.9}.get(self.algo, 2.6)
            self.accept_len = max(1.0, self.rng.gauss(mean, 0.12))
            drafts = max(1, self.a.speculative_num_draft_tokens - 1)
            self.accept_rate = min(1.0, (self.accept_len - 1) / drafts)
        self.noise = max(0.8, self.rng.gauss(1.0, 0.03))

    def step(self, now: float, dt: float) -> tuple[int, int, bool]:
        """Admit and prefill, then decode ``dt`` s at the speed model; returns (tokens, decoding, crash)."""
        new: list[Req] = []
        while self.waiting and len(self.running) < self.max_running:
            r = self.waiting.pop(0)
            r.ready_at = now + 0.02 + r.prompt / 20000 + (1.8 * self.scale if self.jit_pending else 0.0)
            self.jit_pending = False
            new.append(r)
        if new:
            toks = sum(r.prompt for r in new)
            self.c["prefill"] += toks
            used = sum(r.prompt + r.generated for r in self.running + new)
            self.log.info(f"Prefill batch, #new-seq: {len(new)}, #new-token: {toks}, #cached-token: 0, token "
                          f"usage: {used / max(1, self.max_tokens):.2f}, #running-req: {len(self.running)}, "
                          f"#queue-req: {len(self.waiting)}, #pending-token: 0, cuda graph: False, "
                          f"input throughput (token/s): {toks / max(0.05, dt):.2f}", 0)
            self.running += new
        decoding = [r for r in self.running if now >= r.ready_at]
        if decoding and not self.replayed and self.algo == "DFLASH" and self.a.graphs:
            return 0, len(decoding), True
        self.replayed = self.replayed or bool(decoding)
        n, total = len(decoding), 0
        per_stream = (65.0 if self.a.graphs else 38.0) * (self.accept_len * 0.75 if self.algo else 1.0)
        for r in decoding:
            r.acc += per_stream * max(0.2, 1 - 0.03 * (n - 1)) * self.noise * dt
            k = min(int(r.acc), r.max_new - r.generated)
            r.acc -= k
            r.generated += k
            r.verifies += k / max(1.0, self.accept_len) if self.algo else 0.0
            total += k
            if k and r.first_token_at is None:
                r.first_token_at = now
                ttft, key = now - r.created, "true" if r.stream else "false"
                self.ttft_sum[key] = self.ttft_sum.get(key, 0.0) + ttft
                hist = self.ttft.setdefault(key, [0] * (len(TTFT_BUCKETS) + 1))
                hist[next((i for i, b in enumerate(TTFT_BUCKETS) if ttft <= b), -1)] += 1
            if r.generated >= r.max_new:
                self.running.remove(r)
                self.finished(r)
                r.done.set()
                if r in self.background and self.state == "ready":
                    self.background.remove(r)
                    self.background.append(self.submit_locked(self.rng.randint(200, 1200),
                                                               self.rng.randint(150, 500)))
        self.c["decode"] += total
        if self.algo:
            self.verify_steps += total / max(1.0, self.accept_len)
        self.cond.notify_all()
        return total, n, False

    def scheduler_loop(self) -> None:
        """50 ms steps; a decode line per window of real time (--decode-log-interval 40 steps ~ 1 s).

        The printed gen throughput is the number of tokens this loop produced in the window divided by its
        length, the same value /metrics and /server_info report, so clients can check they agree.
        """
        interval = max(0.05, self.a.decode_log_interval / 40.0)
        prev = w_start = time.time()
        w_tokens, last_active, last_beat, n_run = 0, 0.0, 0.0, 0
        self.new_window()
        while True:
            time.sleep(0.05)
            now = time.time()
            dt, prev = now - prev, now
            if self.state in ("stale", "stopping") or self.peer_lost_at is not None:
                continue  # (a lost node: every forward waits on a collective that never completes)
            with self.cond:
                tokens, n_dec, crash = self.step(now, dt)
                w_tokens += tokens
                n_run = len(self.running)
                last_active = now if n_run else last_active
                if not n_dec and not w_tokens:
                    w_start = now
                elif now - w_start >= interval:
                    self.gen_throughput = w_tokens / (now - w_start)
                    if n_dec:
                        tok = sum(r.prompt + r.generated for r in self.running)
                        spec = (f"accept len: {self.accept_len:.2f}, accept rate: {self.accept_rate:.2f}, "
                                if self.algo else "")
                        self.log.info(f"Decode batch, #running-req: {n_run}, #token: {tok}, token usage: "
                                      f"{tok / max(1, self.max_tokens):.2f}, {spec}cuda graph: "
                                      f"{self.a.graphs}, gen throughput (token/s): "
                                      f"{self.gen_throughput:.2f}, #queue-req: {len(self.waiting)}", 0)
                    w_start, w_tokens = now, 0
                    self.new_window()
                if now - last_active > 30:
                    self.gen_throughput = 0.0  # 0.5.23 zeroes the gauge after 30 s idle
            if crash:  # DFLASH verify under CUDA graphs faults at the first replay
                self.die(0, traceback_text(TB_REPLAY, ILLEGAL_ACCESS), SIGQUIT_CHILD)
            if now - last_beat >= 1.0:  # util follows load; the holder file's mtime stays fresh
                last_beat = now
                util = min(95, 60 + int(35 * min(1.0, n_run / 16)) + self.rng.randint(-2, 2)) if n_run else 0
                self.holder.update(util=util)

    # ---- HTTP payloads -------------------------------------------------------------------------------
    def model_info(self) -> dict[str, Any]:
        return {"model_path": self.a.model_path, "tokenizer_path": self.a.model_path,
                "served_model_name": self.a.served_model_name, "is_generation": True,
                "preferred_sampling_params": None, "weight_version": "default",
                "has_image_understanding": False, "model_type": "kimi_k25" if self.is_kimi else "llama",
                "architectures": ["KimiK25ForConditionalGeneration" if self.is_kimi else "LlamaForCausalLM"]}

    def server_info(self) -> dict[str, Any]:
        info = self.sglang_args()
        state: dict[str, Any] = {"last_gen_throughput": round(self.gen_throughput, 2)}
        if self.algo and self.verify_steps:  # over every verify forward since start
            state["avg_spec_accept_length"] = round(self.c["decode"] / self.verify_steps, 2)
        return {**info, "version": self.rel.version, "startup_time": self.holder.data["started"],
                "max_total_num_tokens": self.max_tokens, "internal_states": [state]}

    def metrics(self) -> str:
        """The page as SGLang's multi-process Prometheus collector renders it (labels in name order): the scheduler's
        figures labelled with its ranks, the tokenizer process's without, and a labelled counter only once it has
        been bumped. Names, help and label names as observability/metrics_collector.py of the release declares them.
        """
        tok = {"model_name": self.a.served_model_name, "engine_type": "unified"}
        sch = {**tok, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        out: list[str] = []

        def m(name: str, kind: str, help_: str, samples: list[tuple[str, dict[str, str], float]]) -> None:
            if not samples:  # a family shows once one of its series has been set
                return
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}"])
            for suffix, labels, v in samples:
                text = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
                out.append(f"{name}{suffix}{{{text}}} {float(v)}")

        def by_stream(values: dict[str, float]) -> list[tuple[dict[str, str], float]]:
            if self.rel.is_streaming:
                return [({**tok, "is_streaming": k}, v) for k, v in sorted(values.items())]
            return [(tok, sum(values.values()))] if values else []

        with self.cond:
            used = sum(r.prompt + r.generated for r in self.running)
            for name, help_, v in (
                    ("num_running_reqs", "The number of running requests.", len(self.running)),
                    ("num_queue_reqs", "The number of requests in the waiting queue.", len(self.waiting)),
                    ("gen_throughput", "The generation throughput (token/s).", round(self.gen_throughput, 2)),
                    ("token_usage", "The token usage.", round(used / max(1, self.max_tokens), 4)),
                    # set at every decode-log interval, to that interval's mean; 0 without speculative decoding
                    ("spec_accept_length", "Mean acceptance length of speculative decoding (accepted drafts + "
                     "bonus token per forward).", round(self.accept_len, 3)),
                    ("spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in "
                     "batch).", round(self.accept_rate, 3))):
                m(f"sglang:{name}", "gauge", help_, [("", sch, v)])
            m("sglang:realtime_tokens_total", "counter", "Total number of tokens processed (updated on each log "
              "interval). mode: prefill_compute, prefill_cache, decode.",
              [("", {**sch, "mode": mode}, self.c[key]) for mode, key in (("prefill_compute", "prefill"),
                                                                         ("decode", "decode")) if self.c[key]])
            for key, name, help_ in (("prompt", "prompt_tokens", "Number of prefill tokens processed."),
                                     ("gen", "generation_tokens", "Number of generation tokens processed."),
                                     ("reqs", "num_requests", "Number of requests processed.")):
                m(f"sglang:{name}_total", "counter", help_, [("", lb, v) for lb, v in by_stream(self.fin[key])])
            if self.verify_calls:
                m("sglang:spec_verify_calls_total", "counter", "Number of speculative decoding verification calls.",
                  [("", tok, self.verify_calls)])
            hist: list[tuple[str, dict[str, str], float]] = []
            keys = sorted(self.ttft) if self.rel.is_streaming else ([""] if self.ttft else [])
            for key in keys:
                labels = {**tok, "is_streaming": key} if key else tok
                counts = self.ttft[key] if key else [sum(h[i] for h in self.ttft.values())
                                                     for i in range(len(TTFT_BUCKETS) + 1)]
                total = self.ttft_sum[key] if key else sum(self.ttft_sum.values())
                cum = 0
                for i, b in enumerate([*TTFT_BUCKETS, "+Inf"]):
                    cum += counts[i]
                    hist.append(("_bucket", {**labels, "le": str(b)}, cum))
                hist += [("_count", labels, cum), ("_sum", labels, total)]
            m("sglang:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.", hist)
        return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``python3 server.py`` and ``python3 -m tui.sim``; returns the exit status."""
    return Sim(parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
