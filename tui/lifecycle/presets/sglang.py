"""SGLang 0.4 to 0.5.23: wordings from notes on the released wheels and real logs in public issues."""

from __future__ import annotations

import re

from tui.lifecycle.presets import Classifier, FlagSpec, Marker, Preset, Releases, rx
from tui.lifecycle.presets.common import (
    BAD_ARGS,
    COMMON_CLASSIFIERS,
    CONSEQUENCE,
    CUDA_GRAPH,
    FOREIGN_WORDINGS,
    GENERATION_OK,
    GRAPH_FRAMES,
    KERNEL_FATAL,
    LOADING_FRAMES,
    STOPPING,
    WARMUP_FRAMES,
)
from tui.lifecycle.presets.sglang_hints import hints_for
from tui.lifecycle.presets.sglang_metrics import DETECTION, MEMORY_BUDGET, METRICS, METRICS_HINT, DecodeBatchLine
from tui.model import FailureKind, Phase

MARKERS = (
    Marker(Phase.STARTING, rx(r"^server_args=")),  # no release logs a "Launch(ing) the server" line
    Marker(Phase.LOADING, rx(
        # the process group's set-up (a multi-node rendezvous waits here): srt/model_executor/model_runner.py
        # `Init torch distributed begin.` up to 0.5.20, srt/distributed/bootstrap.py `Init parallel begin.` from 0.5.21
        r"^Init torch distributed begin",
        r"^Init parallel begin",
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
        # `Prefill batch. #new-seq` (0.4.10 ... 0.5.3), `Prefill batch [DP], #new-seq` (0.5.4: the rank always),
        # `Prefill batch{iter}, ...` (0.5.5+: `Prefill batch [N], ...` or `Prefill batch, ...`)
        r"Prefill batch(?: \[\d+\])?[.,]",
        r"Started server process",
        r"Waiting for application startup",
        r"Application startup complete",
        r"Uvicorn running on",
    )),
)

READY = rx(r"The server is fired up and ready to roll")

#: the releases that log each marker wording that not every covered release logs: each bound is the first release
#: with, or without, the wording in the facts of every release 0.4.10, 0.5.1 ... 0.5.23
#: (tests/unit/test_conformance.py holds every covered release to it)
WORDING_RELEASES = {
    r"^Init torch distributed begin": Releases(gone="0.5.21"),  # wheels: 0.5.20 has it, 0.5.21 not
    r"^Init parallel begin": Releases(first="0.5.21"),  # wheels: 0.5.21 srt/distributed/bootstrap.py
    r"KV Cache is allocated": Releases(gone="0.5.17"),  # wheels: 0.5.17 says it in a comment only
    r"^Capture (?:\w+ )*cuda graph begin": Releases(gone="0.5.14"),
    r"^Capture (?:\w+ )*CUDA graph begin": Releases(first="0.5.6"),
    r"^Capture cuda graph bs": Releases(first="0.5.2", gone="0.5.14"),
    r"^Capturing prefill shape": Releases(first="0.5.21"),  # wheels: not in 0.5.20, in 0.5.21
    r"^Capturing num tokens": Releases(first="0.5.4", gone="0.5.21"),  # wheels: in 0.5.20, not in 0.5.21
    r"^Compiling num tokens": Releases(first="0.5.7"),
    r"Uvicorn running on": Releases(first="0.5.23"),  # wheels: not in 0.5.22 (srt/entrypoints/http_server.py)
}

#: the scheduler's watchdog: a forward step ran longer than --watchdog-timeout, on any rank; SGLang then
#: SIGQUITs the tree. 0.4.10-0.5.6: `Watchdog timeout (self.watchdog_timeout=300)`; 0.5.7+: `Scheduler watchdog
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
    *KERNEL_FATAL,
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
    # graphs per phase (0.5.14+ by the facts of every release; the help's "0.5.18+" is older knowledge); where
    # --disable-cuda-graph is deprecated (0.5.14 on) or gone the g key writes both as disabled
    FlagSpec("cuda-graph-backend-decode", "choice", "decode CUDA graph backend (0.5.18+)",
             choices=("full", "breakable", "disabled"), takes_key_from="disable-cuda-graph", toggle_value="disabled",
             companions=("cuda-graph-backend-prefill",)),
    FlagSpec("cuda-graph-backend-prefill", "choice", "prefill CUDA graph backend (0.5.18+)",
             choices=("full", "breakable", "disabled")),
    FlagSpec("cuda-graph-max-bs", "int", "largest batch captured in a CUDA graph (gone in 0.5.20)",
             minimum=1, maximum=4096),
    FlagSpec("cuda-graph-max-bs-decode", "int", "largest decode batch captured in a CUDA graph (0.5.18+)",
             minimum=1, maximum=4096),
    FlagSpec("enable-metrics", "bool", "serve Prometheus /metrics (tokens/s, accept length)", key="m"),
    FlagSpec("mem-fraction-static", "float", "fraction of GPU memory for weights + KV cache",
             minimum=0.05, maximum=0.99),
    FlagSpec("tp-size", "int", "tensor parallel size", aliases=("tp", "tensor-parallel-size"),
             minimum=1, maximum=64),
    FlagSpec("ep-size", "int", "expert parallel size", aliases=("ep",), minimum=1, maximum=64),
    # sglang 0.5.23 srt/speculative/spec_info.py SpeculativeAlgorithm, plus NEXTN (an alias of EAGLE: spec_registry.py
    # _RESERVED_ALIASES); argparse choices until 0.5.10 (EAGLE EAGLE3 NEXTN, + STANDALONE NGRAM by 0.5.5), from 0.5.15
    # a free string read by from_string. The facts of every release list DFLASH from 0.5.11, FROZEN_KV_MTP 0.5.12,
    # DSPARK 0.5.16, UNO 0.5.20, and no NEXTN in 0.5.12 (the flags offered are each release's own)
    FlagSpec("speculative-algorithm", "choice", "speculative decoding algorithm",
             choices=("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP")),
    FlagSpec("speculative-draft-model-path", "str", "draft model", aliases=("speculative-draft-model",)),
    FlagSpec("speculative-num-draft-tokens", "int", "verify window", minimum=1, maximum=64),
    FlagSpec("speculative-dflash-block-size", "int", "DFLASH block size (verify window)", minimum=1, maximum=64),
    FlagSpec("speculative-num-steps", "int", "draft steps", minimum=1, maximum=64),
    FlagSpec("speculative-eagle-topk", "int", "draft top-k", minimum=1, maximum=64),
    FlagSpec("decode-log-interval", "int", "decode steps between `Decode batch` log lines", minimum=1),
    FlagSpec("skip-server-warmup", "bool", "skip the warmup request (hides warmup failures)"),
    FlagSpec("watchdog-timeout", "float", "seconds before a hung scheduler is killed", minimum=1),
)


#: the hints as no release in particular words them; each run's own come from `hints_for` and its release's facts
hint = hints_for(None)


THROUGHPUT_LINE = re.compile(r"Decode batch(?: \[\d+\])?[.,]\s*(?P<rest>.*)$")

SGLANG = Preset(
    node_flags=("node-rank",),
    name="sglang",
    markers=MARKERS,
    ready=READY,
    fatal=FATAL,
    classifiers=CLASSIFIERS,
    hint=hint,
    hints_for=hints_for,
    foreign_wordings=FOREIGN_WORDINGS,
    flags=FLAGS,
    health_path="/health",
    models_path="/v1/models",
    throughput_line=THROUGHPUT_LINE,
    serving=rx(r"Decode batch(?: \[\d+\])?[.,] #running-req: [1-9]"),
    answered=rx(GENERATION_OK),
    phase_hints=(Marker(Phase.GRAPH_CAPTURE, GRAPH_FRAMES), Marker(Phase.WARMUP, WARMUP_FRAMES),
                 Marker(Phase.LOADING, LOADING_FRAMES)),
    wording_releases=WORDING_RELEASES,
    stopping=STOPPING,
    consequence=CONSEQUENCE,
    display_name="SGLang",
    metrics=METRICS,
    log_throughput=DecodeBatchLine(THROUGHPUT_LINE),
    memory_budget=MEMORY_BUDGET,
    metrics_hint=METRICS_HINT,
    detection=DETECTION,
    # no start-up line of 0.4.10 ... 0.5.23 states the release (only `sglang version`, a command of its own, prints
    # it): its HTTP answer does. `/server_info` from 0.5.10 (older: `/get_server_info` only; from 0.5.10 that one
    # logs a deprecation warning at each call, so it comes second), both with `"version": __version__`
    version_paths=("/server_info", "/get_server_info"),
)
