"""SGLang's hints, worded for one release: each names only flags that release's parser takes.

The CUDA-graph and OOM hints used to say `--cuda-graph-max-bs` and `--set disable-cuda-graph`; SGLang 0.5.20
removed the first (the facts: 0.5.19 has it, 0.5.20 not; it is `--cuda-graph-max-bs-decode` / `-prefill` from 0.5.14
on, and the old spelling is then refused as an ambiguous abbreviation) and the second is deprecated from 0.5.14 on
(the facts of every release) for `--cuda-graph-backend-{decode,prefill}=
disabled`). Following a hint must never make the server refuse its command line, so the words come from the
release's facts (tests/unit/test_conformance.py checks every hint of every covered release).
"""

from __future__ import annotations

from tui.lifecycle.presets import HintFn, HintTable
from tui.lifecycle.presets.common import COMMON_HINTS, kernel_hint
from tui.lifecycle.presets.facts import ReleaseFacts
from tui.model import FailureKind, Phase

__all__ = ["graphs_off", "hints_for"]


def _has(facts: ReleaseFacts | None, flag: str) -> bool:
    opt = facts.option(flag) if facts is not None else None
    return opt is not None and not opt.deprecated


def graphs_off(facts: ReleaseFacts | None, known: bool = True) -> str:
    """The `--set` words that turn CUDA graphs off on this release. A release not said yet gets the spelling every
    covered release takes while the newest still does (deprecated there): the new one is refused up to 0.5.17."""
    old = facts.option("--disable-cuda-graph") if facts is not None else None
    if not known and old is not None:
        return "--set disable-cuda-graph"
    if facts is not None and not _has(facts, "--disable-cuda-graph") and _has(facts, "--cuda-graph-backend-decode"):
        sets = ["--set cuda-graph-backend-decode=disabled"]
        if _has(facts, "--cuda-graph-backend-prefill"):
            sets.append("--set cuda-graph-backend-prefill=disabled")
        return " ".join(sets)
    return "--set disable-cuda-graph"


def _max_bs(facts: ReleaseFacts | None) -> str:
    """The flag that caps the batch sizes captured in CUDA graphs, or "" when the release has none."""
    for flag in ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"):
        if facts is None or _has(facts, flag):
            return flag
    return ""


def hints_for(facts: ReleaseFacts | None, known: bool = True) -> HintFn:
    """The hints as this release words them (None: the newest wording, for a preset with no facts at all)."""
    off = graphs_off(facts, known)
    backends = tuple(f for f in ("--attention-backend", "--moe-runner-backend", "--fp8-gemm-backend")
                     if facts is None or _has(facts, f))
    max_bs = _max_bs(facts)
    lower = f"lower {max_bs} or --mem-fraction-static" if max_bs else "lower --mem-fraction-static"
    oom_lower = f"lower --mem-fraction-static, or {max_bs}" if max_bs else "lower --mem-fraction-static"
    watchdog = (" a watchdog timeout means one forward step outlasted --watchdog-timeout (a stuck collective or GPU;"
                " raise it only for steps that are legitimately that slow);"
                if facts is None or _has(facts, "--watchdog-timeout") else "")
    warmup_skip = (" --skip-server-warmup hides this but does not fix it."
                   if facts is None or _has(facts, "--skip-server-warmup") else "")
    table = HintTable(
        by_kind={
            **COMMON_HINTS,
            FailureKind.CUDA_GRAPH: f"CUDA graph capture/replay failed: {lower}, or restart with CUDA graphs off "
                                    f"({off}).",
            FailureKind.OOM: f"CUDA out of memory: {oom_lower}, or turn CUDA graphs off ({off}).",
            FailureKind.NCCL: "NCCL failed: one rank probably died first (find the earliest traceback); check the "
                              "GPUs with `nvidia-smi topo -m`, and rerun with NCCL_DEBUG=INFO for details.",
            FailureKind.KERNEL: kernel_hint(backends),
            FailureKind.PORT_IN_USE: "The port is taken: the previous server may still be shutting down, or another "
                                     "process uses it (`ss -ltnp`).",
            FailureKind.WARMUP: "The HTTP server came up but the warmup request failed: check proxies (no_proxy for "
                                "127.0.0.1) and the model's chat template;" + (warmup_skip or " read the excerpt."),
            FailureKind.SCHEDULER_DIED: "A scheduler process died or hung: exit code -9 usually means the OS OOM "
                                        "killer (check `dmesg` and host RAM);" + watchdog +
                                        " otherwise the first traceback is the cause.",
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
        graphs_on = ("disable-cuda-graph" not in flags and flags.get("cuda-graph-backend-decode") != "disabled")
        if kind == FailureKind.CUDA_GRAPH and spec and graphs_on:
            return (f"CUDA graphs crashed with {spec} speculative decoding: restart with CUDA graphs off "
                    f"(`bringup restart <deployment> {off}`, or in the console: f, g, a).")
        return table(kind, phase, flags)

    return hint
