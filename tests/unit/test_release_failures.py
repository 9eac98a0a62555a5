"""The failures today's releases print, recognised with their phase, kind and hint (issue 48).

Each log here is rendered from the releases' own code: the message templates of the committed facts (extracted from
the wheels: `log_formats`), vLLM's log prefix, and for a refused command line Python's own argparse given the
program names the releases' parsers use (sglang 0.5.17+ srt/server_args.py `ArgumentParser(prog="sglang serve")`;
vLLM's `vllm` parser and its `serve` subparser, entrypoints/cli/main.py + serve.py). Real logs of the same kinds are
fixtures (tests/fixtures/logs/, checked by test_replay_fixtures.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from tui.lifecycle.presets import Releases
from tui.lifecycle.presets.facts import log_formats, releases
from tui.lifecycle.presets.registry import PRESETS
from tui.lifecycle.reducer import initial, reduce
from tui.lifecycle.replay import replay
from tui.model import FailureKind, LogLine, Phase, UnitObserved, UnitState


def _template(server: str, version: str, needle: str) -> str:
    """The release's own message containing `needle`, rendered (a field: "1")."""
    found = [f for f in log_formats(server, version) if needle in f.text]
    assert found, f"{server} {version} logs no message with {needle!r}"
    text = found[0].render("1")
    assert text is not None
    return text


def _vllm(proc: str, level: str, where: str, message: str) -> str:
    """vLLM's log prefix (logging_utils/formatter.py, 0.11+): `(PROC pid=N) LEVEL MM-DD hh:mm:ss [file.py:N] `."""
    return f"({proc} pid=2174) {level} 05-29 17:00:31 [{where}] {message}"


def _argparse_refusal(prog: str, argv: list[str], sub: str = "") -> list[str]:
    """What Python's argparse prints refusing `argv` (usage, then `PROG: error: ...`), for a parser named as the
    release names it, with options spelled as the release spells them."""
    top = argparse.ArgumentParser(prog=prog)
    parser = top
    if sub:
        parser = top.add_subparsers(dest="subparser").add_parser(sub)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int)
    parser.add_argument("--cuda-graph-max-bs-decode", type=int)
    parser.add_argument("--cuda-graph-max-bs-prefill", type=int)
    parser.add_argument("--attention-backend", choices=["fa3", "flashinfer", "triton"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        top.parse_args(([sub] if sub else []) + argv)
    return err.getvalue().splitlines()


# ------------------------------------------------------------------------------- 1: refused command lines

REFUSALS = [
    # SGLang 0.5.20+ without --cuda-graph-max-bs: an abbreviation of the two that replaced it
    ("sglang", "sglang serve", "", ["--cuda-graph-max-bs", "8"], "--cuda-graph-max-bs", "ambiguous option"),
    ("sglang", "sglang serve", "", ["--tc-piecewise"], "--tc-piecewise", "unrecognized arguments"),
    ("sglang", "sglang serve", "", ["--attention-backend", "cudnn"], "--attention-backend", "invalid choice"),
    ("vllm", "vllm", "serve", ["--tensor-parallel-size", "x"], "--tensor-parallel-size", "invalid int value"),
    ("vllm", "vllm", "serve", ["--enable-reasoning"], "--enable-reasoning", "unrecognized arguments"),
]


@pytest.mark.parametrize(("server", "prog", "sub", "argv", "flag", "words"), REFUSALS)
def test_a_refusal_by_a_program_named_in_words_is_bad_args_naming_the_flag(
        server: str, prog: str, sub: str, argv: list[str], flag: str, words: str) -> None:
    lines = _argparse_refusal(prog, argv, sub)
    # a bad value is the subparser's (`vllm serve: error:`), an unknown flag the top parser's (`vllm: error:`)
    assert words in lines[-1] and lines[-1].startswith(prog) and ": error: " in lines[-1]
    r = replay(lines)
    assert r.preset == server
    f = r.as_dict()["failure"]
    assert r.as_dict()["final"] == "failed" and f is not None
    assert f["kind"] == "bad-args" and f["phase"] == "starting"
    assert f"{flag}" in f["hint"], f["hint"]


@pytest.mark.parametrize(("server", "prog", "sub", "argv", "flag", "words"), REFUSALS)
def test_a_refusal_under_a_service_manager_is_bad_args_not_an_exit(
        server: str, prog: str, sub: str, argv: list[str], flag: str, words: str) -> None:
    """Live: the unit starts, prints the refusal, exits 2; the failure is the refusal, its hint the flag's."""
    preset = PRESETS[server]
    s = reduce(initial(), UnitObserved(at=1.0, unit=UnitState(active="active", sub="running", invocation="i1",
                                                              started_at=1.0)), preset)
    for i, line in enumerate(_argparse_refusal(prog, argv, sub)):
        s = reduce(s, LogLine(at=1.1 + i / 100, text=line, invocation="i1"), preset)
    s = reduce(s, UnitObserved(at=2.0, unit=UnitState(active="failed", sub="failed", invocation="i1", exit_status=2,
                                                      exited_at=2.0)), preset)
    assert s.phase == Phase.FAILED and s.failure is not None
    assert s.failure.kind == FailureKind.BAD_ARGS and flag in s.failure.hint


def test_sglang_diffusion_refusal_without_a_program_name() -> None:
    """SGLang's diffusion path: `raise SystemExit(f"error: unrecognized arguments: ...")`, no PROG."""
    r = replay(["[08-10 10:00:00] server_args=...", "error: unrecognized arguments: --served-model-name m"],
               preset_name="sglang")
    f = r.as_dict()["failure"]
    assert f is not None and f["kind"] == "bad-args" and "--served-model-name" in f["hint"]


# ------------------------------------------------------------------------------- 2: the engine core died


def _vllm_034_start() -> list[str]:
    return [
        _vllm("APIServer", "INFO", "startup.py:96", "non-default args: {'model_tag': 'Qwen/Qwen3-8B'}"),
        _vllm("EngineCore", "INFO", "core.py:153", _template("vllm", "0.34.0", "Initializing a V1 LLM engine")),
        _vllm("Worker_TP0", "INFO", "model_runner.py:412", _template("vllm", "0.34.0", "Loading model from scratch")),
    ]


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_vllm_engine_core_exited_unexpectedly_is_a_death_not_a_stop(version: str) -> None:
    died = _template("vllm", version, "engine core exited unexpectedly")
    cleanup = [_template("vllm", version, "[shutdown] MPClient: start timeout"),
               _template("vllm", version, "[shutdown] MPClient: complete")]
    lines = [*_vllm_034_start(), _vllm("APIServer", "WARNING", "core_client.py:870", died),
             *(_vllm("APIServer", "INFO", "core_client.py:822", c) for c in cleanup)]
    d = replay(lines).as_dict()
    assert d["final"] == "failed", d["phases"]
    f = d["failure"]
    assert f is not None and f["kind"] == "scheduler-died" and f["phase"] == "loading"
    assert "engine core exited unexpectedly" in f["excerpt"]


def test_other_vllm_shutdown_lines_stay_a_stop() -> None:
    stop = _template("vllm", "0.34.0", "[shutdown] EngineCore: trigger received signal")
    d = replay([*_vllm_034_start(), _vllm("EngineCore", "INFO", "core.py:1699", stop)]).as_dict()
    assert d["final"] == "stopped" and d["failure"] is None


# ------------------------------------------------------------------------------- 3: SGLang's markers per release


@pytest.mark.parametrize("facts", releases("sglang"), ids=lambda f: f.version)
def test_sglang_process_group_setup_is_loading_on_every_release(facts) -> None:  # type: ignore[no-untyped-def]
    """`Init torch distributed begin.` (up to 0.5.20) or `Init parallel begin.` (0.5.21+): a rendezvous waits
    here, so a run that hangs in it is loading, not starting."""
    begin = [f.render("1") for f in log_formats("sglang", facts.version)
             if f.text.startswith("Init ") and "begin" in f.text]
    assert begin, facts.version
    for text in begin:
        d = replay(["server_args=ServerArgs(model_path='m')", f"[2026-05-29 17:00:31 TP0] {text}"],
                   preset_name="sglang").as_dict()
        assert d["final"] == "loading", (facts.version, text)


def test_wording_releases_bounds() -> None:
    r = Releases(first="0.5.21")
    assert r.covers("0.5.21") and r.covers("0.5.23") and not r.covers("0.5.20")
    assert Releases(gone="0.5.21").covers("0.5.20.post1") and not Releases(gone="0.5.21").covers("0.5.21")


# ------------------------------------------------------------------------------- 7: where a vLLM start-up failed


def _engine_core_failed(frames: list[str], last: str) -> list[str]:
    body = ["EngineCore failed to start.", "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1110, in run_engine_core',
            "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)", *frames, last]
    return [_vllm("EngineCore", "ERROR", "core.py:1140", b) for b in body]


PROFILING = [
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 128, in _initialize_kv_caches',
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 310, in '
    'determine_available_memory',
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 4100, in profile_run',
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3900, in _dummy_run',
    '  File "/usr/local/lib/python3.12/dist-packages/torch/_dynamo/eval_frame.py", line 655, in _fn',
]


def test_vllm_failure_while_profiling_after_load_is_loading_not_graph_capture() -> None:
    """Dynamo's lines (graph-capture's markers) come from profile_run's torch.compile: a failure in its frames is
    the loading phase's, and no CUDA graph failure."""
    compiled = _vllm("EngineCore", "INFO", "backends.py:703", _template("vllm", "0.34.0", "Dynamo bytecode transform"))
    lines = [*_vllm_034_start(), compiled,
             *_engine_core_failed(PROFILING, "torch._dynamo.exc.Unsupported: Unsupported hasattr call")]
    d = replay(lines).as_dict()
    f = d["failure"]
    assert f is not None and f["phase"] == "loading" and f["kind"] != "cuda-graph", f


def test_vllm_failure_in_capture_model_stays_graph_capture() -> None:
    capture = ['  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 4500, in '
               'capture_model', '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 88, in '
               'capture_end']
    compiled = _vllm("EngineCore", "INFO", "backends.py:703", _template("vllm", "0.34.0", "Dynamo bytecode transform"))
    lines = [*_vllm_034_start(), compiled,
             *_engine_core_failed(capture, "RuntimeError: CUDA error: operation failed due to a previous error "
                                           "during capture")]
    f = replay(lines).as_dict()["failure"]
    assert f is not None and f["phase"] == "graph-capture" and f["kind"] == "cuda-graph"


KERNEL_ENDINGS = [
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "NotImplementedError: Error in calling custom op cutlass_scaled_mm: No compiled cutlass_scaled_mm for a compute "
    "capability less than CUDA device capability: 120",
    "RuntimeError: [FP4 gemm Runner] Failed to run cutlass FP4 gemm on sm120. Error: Error Internal",
    "RuntimeError: No supported CUDA architectures found for major versions [12].",
]


@pytest.mark.parametrize("ending", KERNEL_ENDINGS)
def test_vllm_kernel_failures_have_a_kind_and_a_hint(ending: str) -> None:
    d = replay([*_vllm_034_start(), *_engine_core_failed(PROFILING, ending)]).as_dict()
    f = d["failure"]
    assert f is not None and f["kind"] == "kernel" and f["phase"] == "loading"
    assert "TORCH_CUDA_ARCH_LIST" in f["hint"] and "--quantization" in f["hint"] and "--attention-backend" in f["hint"]


def test_api_server_ended_by_an_uncaught_traceback_is_failed() -> None:
    """vLLM's API server refusing its model's config (pydantic) before any engine starts: no fatal wording, but a
    traceback from the program's entry that nothing caught ends the process."""
    tb = ["Traceback (most recent call last):",
          '  File "/usr/local/bin/vllm", line 10, in <module>',
          "    sys.exit(main())",
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1400, in '
          'create_model_config',
          "    return ModelConfig(",
          "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
          "  Value error, invalid literal for int() with base 10: '4.0' [type=value_error]"]
    lines = [_vllm("APIServer", "INFO", "startup.py:96", "non-default args: {'model_tag': 'm'}"),
             *(f"(APIServer pid=2174) {t}" for t in tb)]
    d = replay(lines).as_dict()
    assert d["final"] == "failed", d["phases"]
    assert d["failure"] is not None and "ValidationError" in d["failure"]["excerpt"]


def test_a_handled_traceback_or_a_stop_is_not_an_uncaught_end() -> None:
    """A child's traceback (multiprocessing), or the API server's KeyboardInterrupt on SIGTERM, ends no run."""
    child = ["Process EngineCore_0:", "Traceback (most recent call last):",
             '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
             "ValueError: something the parent reports"]
    stop = ["Traceback (most recent call last):", '  File "/usr/local/bin/vllm", line 10, in <module>',
            "    sys.exit(main())", "KeyboardInterrupt: terminated"]
    start = [_vllm("APIServer", "INFO", "startup.py:96", "non-default args: {'model_tag': 'm'}")]
    assert replay([*start, *child]).as_dict()["final"] == "starting"
    assert replay([*start, *stop]).as_dict()["final"] == "stopped"
