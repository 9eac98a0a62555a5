"""The simulated server's command line: SGLang's flags (those the console toggles) as the imitated release spells them,
with its retired spellings and their warnings, and the sim's own ``--sim-*``, ``--scenario``, ``--time-scale`` and
``--release``. Stdlib only, Python 3.9+, importable as a package module or from the copied directory (server.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from . import gpus
    from .releases import DEPRECATED, NEWEST, RELEASES, Alias, Release
    from .scenarios import SCENARIOS
except ImportError:
    import gpus  # type: ignore[no-redef]
    from releases import DEPRECATED, NEWEST, RELEASES, Alias, Release  # type: ignore[no-redef]
    from scenarios import SCENARIOS  # type: ignore[no-redef]

SPEC_ALGOS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH")
#: the parser's description (`--help`): what the program is
DESCRIPTION = ("The reference server: a simulated SGLang 0.5.x deployment (a `python -m sglang.launch_server` "
               "look-alike).")


class _Deprecated(argparse.Action):
    """A retired spelling the release still takes: SGLang's warning on stderr as it parses, then the value stored
    where the new flag stores it."""

    def __init__(self, option_strings: list[str], dest: str, alias: Alias, stamped: bool, **kw: Any) -> None:
        self.alias, self.stamped = alias, stamped
        if alias.value_type is None:
            kw.update(nargs=0, default=False)
        else:
            kw.update(type=alias.value_type, nargs=alias.nargs)
        super().__init__(option_strings, alias.dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        msg = DEPRECATED.format(flag=option_string, new=self.alias.new)
        stamp = time.strftime("[%Y-%m-%d %H:%M:%S] ") if self.stamped else ""
        sys.stderr.write(f"{stamp}{msg}\n")
        sys.stderr.flush()
        setattr(ns, self.dest, True if self.alias.value_type is None else values)


def build_parser(rel: Release) -> argparse.ArgumentParser:
    """SGLang's flags (those the console toggles) as `rel` spells them, and the sim's ``--sim-*``, ``--scenario``,
    ``--time-scale`` and ``--release``. argparse takes a unique prefix of a long flag, as SGLang's parser does."""
    p = argparse.ArgumentParser(prog="sglang.launch_server", description=DESCRIPTION)
    a = p.add_argument
    a("--release", choices=tuple(RELEASES), default=NEWEST,
      help=f"the SGLang release to imitate (default {NEWEST}): its flags, lines, metrics and routes")
    a("--model-path", default="moonshotai/Kimi-K2.6")
    a("--served-model-name")
    # SGLang's key for its HTTP API: taken and shown in the arguments line as SGLang does, never asked for (bringup's
    # probes send none); the secret canary test sets it (tests/e2e/test_secret_canary.py)
    a("--api-key")
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--tp-size", "--tp", "--tensor-parallel-size", dest="tp_size", type=int, default=8)
    a("--ep-size", "--ep", dest="ep_size", type=int, default=1)
    a("--mem-fraction-static", type=float)
    for phase in ("decode", "prefill"):
        a(f"--cuda-graph-backend-{phase}", choices=rel.graph_backends)
        a(f"--cuda-graph-max-bs-{phase}", type=int)
        a(f"--cuda-graph-bs-{phase}", type=int, nargs="+")
        a(f"--disable-{phase}-cuda-graph", action="store_true")
    for flag, alias in rel.aliases.items():
        a(flag, action=_Deprecated, alias=alias, stamped=rel.warning_stamped)
    a("--speculative-algorithm", type=str.upper, choices=SPEC_ALGOS)
    a("--speculative-draft-model-path")
    for flag in ("num-draft-tokens", "dflash-block-size", "num-steps", "eagle-topk"):
        a(f"--speculative-{flag}", type=int)
    a("--enable-metrics", action="store_true")
    a("--decode-log-interval", type=int, default=40)
    a("--skip-server-warmup", action="store_true")
    a("--watchdog-timeout", type=float, default=300.0)
    a("--trust-remote-code", action="store_true")
    a("--log-level", default="info", help="above info (warning, error): no batch or access lines, as SGLang's logger")
    a("--time-scale", type=float, default=1.0, help="multiplies every simulated duration")
    a("--scenario", choices=SCENARIOS)
    a("--sim-state-dir", default=gpus.default_state_dir())
    a("--sim-gpus", type=int, default=gpus.default_gpu_count())
    a("--sim-gpu-ids", help="comma-separated GPUs this server uses (default: the first tp-size)")
    a("--sim-release-delay", type=float, help="seconds from exit to memory release (default 2, 12 with "
      "oom-on-fast-restart), times --time-scale")
    a("--sim-load", type=int, default=0, help="background concurrent simulated requests")
    a("--sim-seed", type=int)
    a("--sim-crash-after-requests", type=int, default=0, metavar="N",
      help="crash (a scheduler killed) when the N-th streamed chat request arrives; once per --sim-state-dir "
      "(a marker file there), so the run that replaces it serves on")
    a("--nnodes", type=int, default=1, help="nodes the server spans (--tp-size is over all of them)")
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", help="HOST:PORT of node 0's rendezvous (needed with --nnodes > 1)")
    a("--sim-crash-after", type=float, default=0.0, metavar="S",
      help="S seconds (times --time-scale) after this node's bring-up, die of an NCCL error (a worker node's "
      "crash: the head then hangs until its watchdog fires)")
    a("--sim-burst-rate", type=int, default=20_000, help="log-burst: lines per second")
    a("--sim-burst-seconds", type=float, default=10.0, help="log-burst: how long (not scaled)")
    a("--sim-burst-after", type=float, default=10.0, help="log-burst: seconds after ready (not scaled)")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments of the release ``--release`` names (default the newest), with defaults resolved."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--release", choices=tuple(RELEASES), default=NEWEST)
    rel = RELEASES[pre.parse_known_args(argv)[0].release]
    p = build_parser(rel)
    ns = p.parse_args(argv)
    ns.served_model_name = ns.served_model_name or ns.model_path
    if ns.scenario == "dflash-graph-crash" and not ns.speculative_algorithm:
        ns.speculative_algorithm = "DFLASH"
        ns.speculative_dflash_block_size = ns.speculative_dflash_block_size or 8
        ns.speculative_draft_model_path = (ns.speculative_draft_model_path
                                           or "SubSir/Kimi-K2.6-DFlash-tmp-long")
    if ns.speculative_algorithm == "NEXTN":
        ns.speculative_algorithm = "EAGLE"  # SGLang rewrites the alias the same way
    algo = ns.speculative_algorithm
    if algo and algo != "NGRAM" and not ns.speculative_draft_model_path:
        ns.speculative_draft_model_path = f"{ns.model_path}-{algo.lower()}-draft"
    if algo == "DFLASH":
        ns.speculative_num_draft_tokens = (ns.speculative_dflash_block_size
                                           or ns.speculative_num_draft_tokens or 8)
    elif algo == "NGRAM":
        ns.speculative_num_draft_tokens = ns.speculative_num_draft_tokens or 8
    elif algo:
        ns.speculative_num_steps = ns.speculative_num_steps or 3
        ns.speculative_eagle_topk = ns.speculative_eagle_topk or 1
        ns.speculative_num_draft_tokens = (ns.speculative_num_draft_tokens
                                           or ns.speculative_num_steps * ns.speculative_eagle_topk + 1)
    ns.mem_fraction_static = ns.mem_fraction_static or 0.907
    if ns.sim_release_delay is None:
        ns.sim_release_delay = 12.0 if ns.scenario == "oom-on-fast-restart" else 2.0
    if ns.nnodes < 1 or ns.tp_size % ns.nnodes or not 0 <= ns.node_rank < ns.nnodes:
        p.error("--nnodes must divide --tp-size, and --node-rank must be in 0..nnodes-1")
    if ns.nnodes > 1 and not ns.dist_init_addr:
        p.error("--nnodes > 1 needs --dist-init-addr HOST:PORT")
    per_node = ns.tp_size // ns.nnodes  # each node runs its share of the TP ranks, one per local GPU
    ns.gpu_ids = [int(x) for x in ns.sim_gpu_ids.split(",")] if ns.sim_gpu_ids else list(range(per_node))
    if len(ns.gpu_ids) != per_node or max(ns.gpu_ids) >= ns.sim_gpus or min(ns.gpu_ids) < 0:
        p.error(f"need {per_node} GPU ids in 0..{ns.sim_gpus - 1}, got {ns.gpu_ids}")
    if ns.ep_size < 1 or ns.tp_size % ns.ep_size:
        p.error("--ep-size must divide --tp-size")
    ns.disable_cuda_graph = bool(getattr(ns, "disable_cuda_graph", False))
    ns.graph_backend = "disabled" if ns.disable_cuda_graph or ns.disable_decode_cuda_graph else (
        ns.cuda_graph_backend_decode or "full")
    ns.graphs = ns.graph_backend != "disabled"
    ns.graph_max_bs = ns.cuda_graph_max_bs_decode or 256
    ns.rel = rel
    return ns
