"""What released servers really print, read as the releases print it: the arguments line of SGLang 0.5.20+ (a dict),
vLLM's positional model, the start and load lines of each vLLM release, a worker's death, a start-up ended by
SIGTERM, the failure kind decided by the exception that ended the run, vLLM's short spellings of per-node flags,
and SGLang 0.5.23's speculative algorithms.

Each line below is rendered from the format string of the release named beside it (file in the release's wheel),
or is a real line from the public issue cited; the replayed logs are tests/fixtures/logs/*.log (source on their
first line), with their outcome in expected.json.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.lifecycle.flags import parse_changes
from tui.lifecycle.lines import clean
from tui.lifecycle.nodes import node_argv
from tui.lifecycle.presets import Preset, get_preset
from tui.lifecycle.reducer import initial, reduce
from tui.lifecycle.replay import replay
from tui.lifecycle.server_args import argv_from_line, fields_from_line
from tui.lifecycle.state import LifecycleState
from tui.model import FailureKind, LogLine, Phase, UnitObserved, UnitState

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
SGLANG = get_preset("sglang")
VLLM = get_preset("vllm")

#: the hint a CUDA graph crash under speculative decoding gets (tui/lifecycle/presets/sglang.py `hint`)
DFLASH_HINT = "CUDA graphs crashed with DFLASH speculative decoding: restart with CUDA graphs off"


def _log(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def _args_line(name: str) -> str:
    return next(x for x in _log(name) if not x.startswith("# ") and ("server_args=" in x or "non-default args:" in x
                                                                    or "args: Namespace(" in x))


def _feed(events: list[UnitObserved | LogLine], preset: Preset, s: LifecycleState | None = None) -> LifecycleState:
    s = s if s is not None else initial()
    for ev in events:
        s = reduce(s, ev, preset)
    return s


def _lines(texts: list[str], at: float = 100.0, inv: str = "run-1") -> list[LogLine]:
    return [LogLine(at=at + i, text=t, invocation=inv) for i, t in enumerate(texts)]


def _unit(at: float, active: str = "active", sub: str = "running", status: int | None = None) -> UnitObserved:
    return UnitObserved(at, UnitState(active=active, sub=sub, main_pid=4242, invocation="run-1", started_at=99.0,
                                      exit_status=status))


# ---------------------------------------------------------------------------------------------------------------
# 1. SGLang's arguments line: `server_args={...}` (0.5.20+, ServerArgs.resolved_dict()), `ServerArgs(...)` before


@pytest.mark.parametrize("name", ["sglang_v0523_dict_args_dflash_capture_failed.log",
                                  "sglang_v0518_serverargs_dflash_capture_failed.log"])
def test_a_replay_reads_the_arguments_line_of_either_form_and_gives_the_dflash_hint(name: str) -> None:
    r = replay(_log(name))
    f = r.state.failure
    assert f is not None and (f.kind, f.phase) == (FailureKind.CUDA_GRAPH, Phase.GRAPH_CAPTURE)
    assert f.hint.startswith(DFLASH_HINT), f.hint
    flags = r.as_dict()["flags"]
    assert isinstance(flags, dict)
    assert flags["speculative-algorithm"] == "DFLASH" and flags["tp-size"] == "8" and flags["ep-size"] == "8"
    assert "disable-cuda-graph" not in flags


def test_the_dict_form_with_graphs_off_gets_no_turn_graphs_off_hint() -> None:
    lines = _log("sglang_v0523_dict_args_dflash_capture_failed.log")
    i = lines.index(_args_line("sglang_v0523_dict_args_dflash_capture_failed.log"))
    for off in ("'disable_cuda_graph': True", "'cuda_graph_backend_decode': 'disabled'"):
        edited = lines[i].replace(off.split(": ")[0] + (": False" if "disable_cuda" in off else ": None"), off)
        assert edited != lines[i]
        f = replay([*lines[:i], edited, *lines[i + 1:]]).state.failure
        assert f is not None and not f.hint.startswith(DFLASH_HINT), (off, f.hint)
    # resolution turned the decode graphs off (the resolved `cuda_graph_config` says so, no flag was given)
    resolved_off = lines[i].replace("{'decode': {'backend': 'full'", "{'decode': {'backend': 'disabled'")
    assert resolved_off != lines[i]
    f = replay([*lines[:i], resolved_off, *lines[i + 1:]]).state.failure
    assert f is not None and not f.hint.startswith(DFLASH_HINT), f.hint


def test_a_cut_arguments_line_reads_its_top_level_fields_before_the_cut_and_no_nested_one() -> None:
    for name in ("sglang_v0523_dict_args_dflash_capture_failed.log",
                 "sglang_v0518_serverargs_dflash_capture_failed.log"):
        line = _args_line(name)
        cut = line[:line.index("speculative_draft_model_path")] + " …[cut]"  # as tui/lifecycle/lines.py cuts
        fields = fields_from_line(clean(cut).text)
        assert fields is not None, name
        assert fields["speculative_algorithm"] == "DFLASH" and fields["tp_size"] == 8, name
        # the fields of the nested CUDA graph config are not the server's options
        assert not {"backend", "max_bs", "bs", "tc_compiler", "decode", "prefill"} & set(fields), (name, fields)
        argv = argv_from_line(clean(cut).text)
        assert argv is not None and "--backend" not in argv and "--max-bs" not in argv


def test_the_full_dict_line_gives_the_nested_config_as_one_json_option() -> None:
    argv = argv_from_line(clean(_args_line("sglang_v0523_dict_args_dflash_capture_failed.log")).text)
    assert argv is not None
    assert argv[argv.index("--cuda-graph-config") + 1].startswith('{"decode":{"backend":"full"')
    assert argv[argv.index("--speculative-algorithm") + 1] == "DFLASH"
    assert "--backend" not in argv and "--decode" not in argv


# ---------------------------------------------------------------------------------------------------------------
# 2. vLLM's `model_tag` is `vllm serve MODEL`'s positional (entrypoints/cli/serve.py: args.model = args.model_tag)


def test_vllm_model_tag_is_the_positional_model_not_an_option() -> None:
    # vllm 0.34.0 entrypoints/common/startup.py `non-default args: %s` of `vllm serve Qwen/Qwen3-8B -tp 2`
    line = "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', 'tensor_parallel_size': 2}"
    assert argv_from_line(line) == ("Qwen/Qwen3-8B", "--tensor-parallel-size", "2")
    # vllm 0.8.5 entrypoints/openai/api_server.py `args: %s` of `vllm serve`: the subcommand's own fields too
    argv = argv_from_line(clean(_args_line("vllm_v085_sigterm_while_loading.log")).text)
    assert argv is not None and argv[0] == "google/gemma-3-1b-it"
    assert not {"--model-tag", "--model", "--subparser", "--dispatch-function"} & set(argv), argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "1"
    # `--model` alone (an api_server started directly, or `vllm serve --model`): the option it is
    assert argv_from_line("non-default args: {'model': 'm', 'max_model_len': 4096}") == \
        ("--model", "m", "--max-model-len", "4096")


def test_a_replay_of_vllm_reads_the_positional_model_and_the_flags() -> None:
    r = replay(_log("vllm_v034_sigterm_while_loading.log"))
    assert r.as_dict()["flags"] == {"tensor-parallel-size": "2", "max-model-len": "32768"}


# ---------------------------------------------------------------------------------------------------------------
# 3-4. the start and load lines of each release: rendered from its format strings


def _phase_of(preset: Preset, line: str) -> Phase | None:
    text = clean(line).text
    return next((m.phase for m in preset.markers if m.pattern.search(text)), None)


#: (release, file in its wheel, the line as that release logs it)
VLLM_START = [
    ("0.8.5", "vllm/v1/engine/core.py", "Initializing a V1 LLM engine (v0.8.5) with config: model='m', "),
    ("0.8.5", "vllm/engine/llm_engine.py",
     "Initializing a V0 LLM engine (v0.8.5) with config: model='m', use_cached_outputs=False, "),
    ("0.10.2", "vllm/engine/llm_engine.py",
     "Initializing a V0 LLM engine (v0.10.2) with config: model='m', use_cached_outputs=False, "),
    *[(v, "vllm/v1/engine/core.py", f"Initializing a V1 LLM engine (v{v}) with config: model='m', ")
      for v in ("0.9.2", "0.10.2", "0.11.0", "0.15.0", "0.20.0", "0.25.0", "0.30.0", "0.33.0", "0.34.0")],
    ("0.8.5", "vllm/entrypoints/openai/api_server.py", "vLLM API server version 0.8.5"),
    ("0.11.0", "vllm/entrypoints/openai/api_server.py", "vLLM API server version 0.11.0"),
    # log_version_and_model (0.15.0+): plain, or (the default) its logo, one line of it naming the release
    ("0.34.0", "vllm/entrypoints/common/startup.py", "vLLM server version 0.34.0, serving model m"),
    ("0.15.0", "vllm/entrypoints/utils.py",
     "(APIServer pid=1) INFO 05-29 16:59:40 [utils.py:324]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.15.0"),
    ("0.34.0", "vllm/entrypoints/common/startup.py",
     "(APIServer pid=1) INFO 05-29 16:59:40 [startup.py:38]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.34.0"),
]
VLLM_LOAD = [
    *[(v, "vllm/v1/worker/gpu_model_runner.py", "Starting to load model Qwen/Qwen3-8B...")
      for v in ("0.8.5", "0.9.2", "0.10.2", "0.11.0", "0.15.0", "0.20.0", "0.25.0", "0.30.0", "0.33.0")],
    # the V2 model runner (v1/worker/gpu/model_runner.py, 0.15.0+), the only one in 0.34.0; and 0.9-0.11 V1
    *[(v, "vllm/v1/worker/gpu/model_runner.py", "Loading model from scratch...")
      for v in ("0.15.0", "0.20.0", "0.25.0", "0.30.0", "0.33.0", "0.34.0")],
    *[(v, "vllm/v1/worker/gpu_model_runner.py", "Loading model from scratch...")
      for v in ("0.9.2", "0.10.2", "0.11.0")],
    ("0.34.0", "vllm/v1/worker/gpu/model_runner.py", "Model loading took 7.63 GiB memory and 35.912409 seconds"),
    ("0.34.0", "vllm/model_executor/model_loader/default_loader.py", "Loading weights took 31.02 seconds"),
]


@pytest.mark.parametrize(("release", "source", "line"), VLLM_START, ids=[f"{v}-{s}" for v, s, _ in VLLM_START])
def test_each_vllm_releases_start_line_is_a_start(release: str, source: str, line: str) -> None:
    assert _phase_of(VLLM, line) == Phase.STARTING, (release, source, line)


@pytest.mark.parametrize(("release", "source", "line"), VLLM_LOAD, ids=[f"{v}-{s}" for v, s, _ in VLLM_LOAD])
def test_each_vllm_releases_load_line_is_loading(release: str, source: str, line: str) -> None:
    assert _phase_of(VLLM, line) == Phase.LOADING, (release, source, line)


def test_a_vllm_034_start_is_seen_loading() -> None:
    s = replay(_log("vllm_v034_worker_died_oom_killer.log")[:5]).state
    assert [t.phase for t in s.timeline] == [Phase.STARTING, Phase.LOADING]
    assert s.timeline[-1].line == "Loading model from scratch..."


def test_the_engine_line_of_a_new_run_after_a_clean_stop_starts_it() -> None:
    # a replayed journal of the engine core alone: a run stopped cleanly, then the next one's first line
    stop = ["(EngineCore pid=2301) INFO 05-29 17:00:31 [core.py:1698] [shutdown] EngineCore: trigger received "
            "signal=SIGTERM"]
    start = ["(EngineCore pid=9120) INFO 05-29 17:05:02 [core.py:153] Initializing a V1 LLM engine (v0.34.0) with "
             "config: model='Qwen/Qwen3-8B', speculative_config=None"]
    load = _log("vllm_v034_worker_died_oom_killer.log")[4:5]
    s = replay([*load, *stop, *start]).state
    assert s.phase == Phase.STARTING and s.timeline[0].line.startswith("Initializing a V1 LLM engine"), s.timeline


# ---------------------------------------------------------------------------------------------------------------
# 5. a worker process dies (vllm v1/executor/multiproc_executor.py; the exit code from 0.30.0)


def test_a_workers_death_is_fatal_and_says_the_oom_killer_for_minus_9() -> None:
    s = replay(_log("vllm_v034_worker_died_oom_killer.log")).state
    f = s.failure
    assert f is not None and (f.kind, f.phase) == (FailureKind.SCHEDULER_DIED, Phase.READY)
    assert f.excerpt[0].endswith("Worker proc VllmWorker-1 died unexpectedly (exit code: -9), shutting down executor.")
    assert "-9" in f.hint and "OOM killer" in f.hint


@pytest.mark.parametrize("line", [
    # vllm 0.8.5 ... 0.25.0 v1/executor/multiproc_executor.py
    "ERROR 05-29 17:20:00 [multiproc_executor.py:124] Worker proc VllmWorker-1 died unexpectedly, shutting down "
    "executor.",
    # vllm 0.30.0 ... 0.34.0
    "(EngineCore pid=7) ERROR 05-29 17:20:00 [multiproc_executor.py:404] Worker proc VllmWorker-0 died unexpectedly "
    "(exit code: 1), shutting down executor.",
    # vllm 0.10.2 ... 0.15.0 v1/engine/core_client.py
    "(APIServer pid=1) ERROR 05-29 17:20:00 [core_client.py:565] Engine core proc EngineCore_DP0 died unexpectedly, "
    "shutting down client.",
])
def test_a_process_death_line_of_any_release_fails_the_run_as_a_process_death(line: str) -> None:
    ready = "(APIServer pid=1) INFO:     Application startup complete."
    s = _feed([_unit(99.0), *_lines([ready, line])], VLLM, initial(require_probe=False))
    assert s.phase == Phase.FAILED and s.failure is not None and s.failure.kind == FailureKind.SCHEDULER_DIED


def test_a_worker_that_exited_on_the_stop_signal_is_no_failure() -> None:
    # systemd's SIGTERM reaches every process: a worker's handler exits 0 before the engine core says why
    died = ("(EngineCore pid=2301) ERROR 05-29 17:20:00 [multiproc_executor.py:404] Worker proc VllmWorker-1 died "
            "unexpectedly (exit code: 0), shutting down executor.")
    stop = ("(EngineCore pid=2301) INFO 05-29 17:20:00 [core.py:1698] [shutdown] EngineCore: trigger received "
            "signal=SIGTERM")
    lines = _log("vllm_v034_worker_died_oom_killer.log")
    s = replay([*lines[:lines.index(next(x for x in lines if "died" in x))], died, stop]).state
    assert s.phase == Phase.STOPPED and s.failure is None, s.timeline


# ---------------------------------------------------------------------------------------------------------------
# 6. a start-up ended by SIGTERM: vLLM's handler raises KeyboardInterrupt("terminated") (0.8.5 ... 0.34.0)


@pytest.mark.parametrize("name", ["vllm_v034_sigterm_while_loading.log", "vllm_v085_sigterm_while_loading.log"])
def test_a_replayed_start_ended_by_sigterm_is_stopped_with_its_reason(name: str) -> None:
    s = replay(_log(name)).state
    assert s.phase == Phase.STOPPED and s.failure is None, s.timeline
    assert [t.phase for t in s.timeline][-3:] == [Phase.LOADING, Phase.STOPPING, Phase.STOPPED]
    assert s.timeline[-1].line == "terminated by SIGTERM while loading", s.timeline[-1]


@pytest.mark.parametrize("status", [130, -2, None], ids=["docker-130", "killed-by-SIGINT", "no-status"])
@pytest.mark.parametrize("lagging", [False, True], ids=["log-first", "exit-first"])
def test_a_live_start_ended_by_sigterm_is_stopped_not_failed(status: int | None, lagging: bool) -> None:
    """The process exits by the uncaught KeyboardInterrupt (SIGINT: docker says 130); a journal read over SSH may
    deliver the traceback after the exit: the same outcome either way."""
    lines = [x for x in _log("vllm_v085_sigterm_while_loading.log") if not x.startswith("# ")]
    exit_ = _unit(200.0, "failed", "exited", status)
    events: list[UnitObserved | LogLine] = [_unit(99.0), *_lines(lines[:4])]
    rest = _lines(lines[4:], at=150.0)
    events += [exit_, *rest] if lagging else [*rest, exit_]
    s = _feed(events, VLLM)
    assert s.phase == Phase.STOPPED and s.failure is None, s.timeline
    assert "terminated by SIGTERM while loading" in [t.line for t in s.timeline], s.timeline


def test_a_start_killed_by_sigterm_without_a_word_is_stopped() -> None:
    # SGLang installs no SIGTERM handler while it launches (0.5.23: the tokenizer manager's comes with its event
    # loop): the process dies of the signal, saying nothing
    load = "[2026-05-29 16:59:48 TP0] Load weight begin. avail mem=78.50 GB"
    for status in (-15, 143):
        s = _feed([_unit(99.0), *_lines([load]), _unit(120.0, "failed", "exited", status)], SGLANG)
        assert s.phase == Phase.STOPPED and s.failure is None, (status, s.timeline)
        assert s.timeline[-1].line == "terminated by SIGTERM while loading", s.timeline


def test_a_real_failure_then_sigterm_stays_a_failure() -> None:
    stop = ["(EngineCore pid=2301) INFO 05-29 17:20:02 [core.py:1698] [shutdown] EngineCore: trigger received "
            "signal=SIGTERM", "KeyboardInterrupt: terminated"]
    s = replay([*_log("vllm_v034_worker_died_oom_killer.log"), *stop]).state
    assert s.phase == Phase.FAILED and s.failure is not None and s.failure.kind == FailureKind.SCHEDULER_DIED


# ---------------------------------------------------------------------------------------------------------------
# 7. the kind comes from the exception that ended the run, not from a warning that names NCCL


#: PyTorch's warning at the exit of a process that used NCCL (real line: vllm-project/vllm#17386, vllm 0.8.5)
NCCL_EXIT_WARNING = ("[rank0]:[W508 00:41:45.803613446 ProcessGroupNCCL.cpp:1496] Warning: WARNING: "
                     "destroy_process_group() was not called before program exit, which can leak resources. For "
                     "more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown "
                     "(function operator())")


def test_an_nccl_exit_warning_in_the_excerpt_does_not_make_an_nccl_failure() -> None:
    f = replay(_log("sglang_v0523_load_error_nccl_exit_warning.log")).state.failure
    assert f is not None and f.kind == FailureKind.SCHEDULER_DIED
    assert any("destroy_process_group()" in x for x in f.excerpt), "the warning stays in the excerpt, as printed"


def test_a_capture_failure_with_the_exit_warning_is_a_cuda_graph_failure() -> None:
    lines = _log("sglang_v0523_dict_args_dflash_capture_failed.log")
    end = lines.index(next(x for x in lines if x.startswith("Open an issue on GitHub")))
    f = replay([*lines[:end + 1], NCCL_EXIT_WARNING, *lines[end + 1:]]).state.failure
    assert f is not None and f.kind == FailureKind.CUDA_GRAPH, f.kind
    # vLLM 0.11.0 (v1/worker/gpu_model_runner.py capture_model, v1/engine/core.py run_engine_core: the engine
    # core's traceback logged at ERROR): a capture error, then the warning as its process exits
    ec = "(EngineCore_DP0 pid=3112) ERROR 12-15 12:35:12 [core.py:708]"
    capture = [
        "(EngineCore_DP0 pid=3112) INFO 12-15 12:35:11 [gpu_model_runner.py:3496] Capturing CUDA graphs "
        "(mixed prefill-decode, PIECEWISE): 100%",
        f"{ec} EngineCore failed to start.",
        f"{ec} Traceback (most recent call last):",
        f'{ec}   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3446, in '
        "capture_model",
        f"{ec}     self._capture_cudagraphs(",
        f"{ec} RuntimeError: CUDA error: operation failed due to a previous error during capture",
        NCCL_EXIT_WARNING,
    ]
    f = replay(capture).state.failure
    assert f is not None and f.kind == FailureKind.CUDA_GRAPH, f


def test_a_real_nccl_failure_is_still_one() -> None:
    f = replay(_log("sglang_nccl_init_error.log")).state.failure
    assert f is not None and f.kind == FailureKind.NCCL


# ---------------------------------------------------------------------------------------------------------------
# 8. vLLM's short spellings of per-node flags (vllm engine/arg_utils.py): -r --node-rank (0.15.0+),
# -dpn --data-parallel-rank and -dpl --data-parallel-size-local (0.9.2+), -dpr --data-parallel-start-rank (0.10.2+)


def test_an_unrelated_edit_keeps_each_nodes_own_rank_in_short_spellings() -> None:
    head = ["vllm", "serve", "m", "-tp", "8", "--max-num-seqs", "64", "-n", "2", "-r", "0", "--master-addr", "h"]
    worker = ["vllm", "serve", "m", "-tp", "8", "--max-num-seqs", "64", "-r", "1", "-n", "2", "--master-addr", "h",
              "--headless"]
    edited = [*head[:6], "128", *head[7:]]
    out = node_argv(head, edited, worker, VLLM.node_flags)
    assert out[out.index("-r") + 1] == "1" and out.count("-r") == 1, out
    assert out[out.index("--max-num-seqs") + 1] == "128" and "--headless" in out, out
    assert out[out.index("-n") + 1] == "2" and out.count("-n") == 1, out


def test_an_unrelated_edit_keeps_each_nodes_own_data_parallel_ranks() -> None:
    head = ["vllm", "serve", "m", "--max-model-len", "8192", "-dp", "4", "-dpl", "2", "-dpa", "10.0.0.1"]
    worker = ["vllm", "serve", "m", "--max-model-len", "8192", "-dpr", "2", "-dpl", "2", "-dp", "4", "-dpa",
              "10.0.0.1", "--headless"]
    edited = [*head[:4], "4096", *head[5:]]
    out = node_argv(head, edited, worker, VLLM.node_flags)
    assert out[out.index("-dpr") + 1] == "2" and out[out.index("-dpl") + 1] == "2", out
    assert out[out.index("--max-model-len") + 1] == "4096" and "--headless" in out, out
    # an edit of a node's own flag on the head (spelled any way vLLM's parser takes it) stays the head's
    for spelling in (["-dpl", "3"], ["-dpl=3"], ["--data-parallel-size-local", "3"], ["--data_parallel_size_local=3"]):
        moved = [*head[:7], *spelling, *head[9:]]
        assert node_argv(head, moved, worker, VLLM.node_flags) == worker, spelling


@pytest.mark.parametrize("spelling", [["--node_rank", "{}"], ["--node-rank={}"], ["-r", "{}"], ["-r={}"], ["-r{}"]])
def test_a_rank_edited_on_the_head_in_any_spelling_is_not_copied_to_a_node(spelling: list[str]) -> None:
    def line(rank: int) -> list[str]:
        return ["vllm", "serve", "m", "--max-num-seqs", "64", *[w.format(rank) for w in spelling], "-tp", "16",
                "--nnodes", "2"]
    head, worker = line(0), line(1)
    assert node_argv(head, line(5), worker, VLLM.node_flags) == worker


# ---------------------------------------------------------------------------------------------------------------
# 9. SGLang 0.5.23's speculative algorithms (srt/speculative/spec_info.py SpeculativeAlgorithm)


@pytest.mark.parametrize("algorithm", ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO",
                                       "FROZEN_KV_MTP"])
def test_every_speculative_algorithm_of_sglang_0523_can_be_set(algorithm: str) -> None:
    changes = parse_changes([f"speculative-algorithm={algorithm.lower()}"], [], SGLANG.flags)
    assert [(c.name, c.value) for c in changes] == [("speculative-algorithm", algorithm)]
