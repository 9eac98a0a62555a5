"""What differs between the SGLang releases the simulated server imitates (`--release`): one row a release, read in
that release's wheel (file names below are under `sglang/srt/` of it). Everything else the sim prints and serves
is the same in all of them. Stdlib only, Python 3.9+: the directory is copied alone to test hosts.
"""

from __future__ import annotations

from dataclasses import dataclass

#: `DeprecatedStoreTrueAction` / `DeprecatedAliasStoreAction` (arg_groups/argparse_actions.py), via
#: `print_deprecated_warning`: a logger.warning in bold yellow
DEPRECATED = "\033[1;33m'{flag}' is deprecated and will be removed in a future release. Use '{new}' instead.\033[0m"


@dataclass(frozen=True)
class Alias:
    """A retired spelling the release still takes, with a warning naming its replacement."""

    dest: str
    new: str
    #: None: a switch (`DeprecatedStoreTrueAction`), else the value's type (`DeprecatedAliasStoreAction`)
    value_type: type | None = None
    nargs: str | None = None


@dataclass(frozen=True)
class Release:
    version: str
    #: the arguments line (entrypoints/engine.py): "dataclass" `server_args=ServerArgs(k=v, ...)` (`{server_args=}`)
    #: or "dict" `server_args={'k': v, ...}` (`ServerArgs.resolved_dict()`, 0.5.20+)
    args_line: str
    #: torch distributed start-up, on every rank: begin; end (format fields `elapsed`, `mem`); a line after it
    init_begin: str
    init_end: str
    init_after: str | None
    #: the decode-graph capture lines (model_runner_components/cuda_graph_setup.py, speculative/eagle_worker_v2.py):
    #: the name of the per-request token count, and whether the target's batch sizes close the capture (0.5.23)
    #: instead of opening it (the draft's open it in every release)
    tokens_key: str
    target_bs_at_end: bool
    #: the tokenizer process's request counters and TTFT histogram carry `is_streaming` (0.5.18+)
    is_streaming: bool
    #: GET /ready (entrypoints/http_server.py, 0.5.20+)
    ready_route: bool
    #: what --cuda-graph-backend-{decode,prefill} take (model_executor/cuda_graph_config.py `Backend.ALL`)
    graph_backends: tuple[str, ...]
    #: retired spellings still taken (server_args.py `add_cli_args`, "Deprecated argument registrations")
    aliases: dict[str, Alias]
    #: a warning while the arguments are parsed goes out as `[date time] msg` where logging is set up at import
    #: (0.5.23: launch_server's `suppress_noisy_warnings` -> `configure_hf_hub_logger` -> basicConfig), else bare
    #: (Python's last-resort handler); both on stderr
    warning_stamped: bool


_DISABLE = {"--disable-cuda-graph": Alias("disable_cuda_graph", "--cuda-graph-backend-{decode,prefill}=disabled")}
_MAX_BS = {"--cuda-graph-max-bs": Alias("cuda_graph_max_bs_decode", "--cuda-graph-max-bs-decode", int),
           "--cuda-graph-bs": Alias("cuda_graph_bs_decode", "--cuda-graph-bs-decode", int, "+")}
_TORCH_INIT = ("Init torch distributed begin.", "Init torch distributed ends. elapsed={elapsed:.2f} s, "
               "mem usage={mem:.2f} GB", None)

RELEASES: dict[str, Release] = {r.version: r for r in (
    Release("0.5.15", "dataclass", *_TORCH_INIT, tokens_key="num_tokens_per_bs", target_bs_at_end=False,
            is_streaming=False, ready_route=False, graph_backends=("full", "breakable", "tc_piecewise", "disabled"),
            aliases={**_MAX_BS, **_DISABLE}, warning_stamped=False),
    Release("0.5.18", "dataclass", *_TORCH_INIT, tokens_key="num_tokens_per_req", target_bs_at_end=False,
            is_streaming=True, ready_route=False, graph_backends=("full", "breakable", "tc_piecewise", "disabled"),
            aliases={**_MAX_BS, **_DISABLE}, warning_stamped=False),
    # distributed/bootstrap.py `init_parallel_runtime`, `measure_pre_model_load_memory`
    Release("0.5.23", "dict", "Init parallel begin.", "Init parallel ends. elapsed={elapsed:.2f} s",
            "Memory baseline taken. mem usage={mem:.2f} GB", tokens_key="num_tokens_per_req", target_bs_at_end=True,
            is_streaming=True, ready_route=True, graph_backends=("full", "breakable", "disabled"),
            aliases=dict(_DISABLE), warning_stamped=True),
)}
NEWEST = list(RELEASES)[-1]
