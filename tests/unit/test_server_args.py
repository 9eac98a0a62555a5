"""A server's own arguments read back (tui/lifecycle): SGLang's `server_args=` line (whole, cut, any flag) and vLLM's
non-default args become the options they came from, never raising, with the live DFlash hint; and the flag names
suggested for a typo are the closest known. The CLI printing them: tests/e2e/test_cli_usage.py."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.dflash_crash import DFLASH_CRASH, DFLASH_HINT, SERVER_ARGS
from tui.lifecycle.presets import get_preset
from tui.lifecycle.reducer import initial, reduce
from tui.lifecycle.replay import replay
from tui.lifecycle.server_args import argv_from_fields, argv_from_line, fields_from_line
from tui.model import FailureKind, LogLine, Phase, UnitObserved, UnitState

ROOT = Path(__file__).resolve().parents[2]


#: the DFLASH deployment's command line, as the live console reads it from the unit
DFLASH_ARGV = ("/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/root/models/Kimi-K2.6",
               "--tp-size", "8", "--ep-size", "8", "--speculative-algorithm", "DFLASH",
               "--speculative-draft-model-path", "/root/models/Kimi-K2.6-DFlash", "--speculative-dflash-block-size",
               "8", "--port", "30001", "--enable-metrics", "--mem-fraction-static", "0.85")


def _live_hint(lines: list[str], argv: tuple[str, ...]) -> str:
    """The hint the console gives for these lines of a run whose unit has this argv (the engine's events)."""
    sglang = get_preset("sglang")
    s = reduce(initial(), UnitObserved(100.0, UnitState(active="active", sub="running", main_pid=4242,
                                                        invocation="inv", started_at=100.0, argv=argv)), sglang)
    for i, text in enumerate(lines):
        s = reduce(s, LogLine(at=101.0 + i, text=text, invocation="inv"), sglang)
    assert s.failure is not None
    return s.failure.hint


# the arguments lines, as each server prints them
SGLANG_LINE = "server_args=ServerArgs(model_path='m', tp_size=8, disable_cuda_graph=True, enable_metrics=False, " \
              "lora_paths=None, cuda_graph_bs=[1, 2], json_model_override_args='{}', chat_template='')"


VLLM_DICT = "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'tensor_parallel_size': 2, 'enforce_eager': True, " \
            "'speculative_config': {'method': 'dflash', 'num_speculative_tokens': 8}}"


VLLM_NAMESPACE = "args: Namespace(host=None, port=8000, model='Qwen/Qwen2-7B', tensor_parallel_size=4, " \
                 "enforce_eager=False, max_model_len=4096)"


def test_the_flag_names_suggested_are_the_closest_known() -> None:
    from tui.config.settings import did_you_mean

    assert did_you_mean("tpsize", ["disable-cuda-graph", "tp-size", "ep-size"]) == " (did you mean 'tp-size'?)"
    assert did_you_mean("zzz", ["tp-size"]) == ""


def test_replay_reads_the_flags_from_server_args_and_gives_the_live_dflash_hint() -> None:
    r = replay(DFLASH_CRASH)
    f = r.state.failure
    assert f is not None and f.kind == FailureKind.CUDA_GRAPH and f.phase == Phase.READY
    assert f.hint.startswith(DFLASH_HINT), f.hint
    assert f.hint == _live_hint(DFLASH_CRASH[1:], DFLASH_ARGV)  # what the console said, word for word
    flags = r.as_dict()["flags"]
    assert isinstance(flags, dict)
    assert flags["speculative-algorithm"] == "DFLASH" and flags["tp-size"] == "8"
    assert flags["enable-metrics"] is None and "disable-cuda-graph" not in flags  # a switch on; one off


def test_replay_reads_any_flag_of_server_args_not_the_one_case() -> None:
    # graphs off by another flag the hint looks at: no "turn graphs off" for a run that had them off
    off = SERVER_ARGS.replace("disable_cuda_graph=False", "disable_cuda_graph=True")
    f = replay([off, *DFLASH_CRASH[1:]]).state.failure
    assert f is not None and not f.hint.startswith(DFLASH_HINT), f.hint
    # no speculative decoding: the table's own CUDA graph hint, as live
    plain = SERVER_ARGS.replace("speculative_algorithm='DFLASH'", "speculative_algorithm=None")
    f = replay([plain, *DFLASH_CRASH[1:]]).state.failure
    plain_argv = tuple(a for a in DFLASH_ARGV if a not in ("--speculative-algorithm", "DFLASH"))
    assert f is not None and f.hint == _live_hint(DFLASH_CRASH[1:], plain_argv) and "DFLASH" not in f.hint
    # EAGLE3 too: the algorithm is read, not matched against one word
    eagle = SERVER_ARGS.replace("speculative_algorithm='DFLASH'", "speculative_algorithm='EAGLE3'")
    f = replay([eagle, *DFLASH_CRASH[1:]]).state.failure
    assert f is not None and f.hint.startswith("CUDA graphs crashed with EAGLE3 speculative decoding"), f.hint


def test_replay_of_a_cut_server_args_line_still_reads_the_fields_before_the_cut() -> None:
    cut = SERVER_ARGS[:SERVER_ARGS.index("speculative_draft_model_path")]  # journald's line limit, an excerpt
    f = replay([cut, *DFLASH_CRASH[1:]]).state.failure
    assert f is not None and f.hint.startswith(DFLASH_HINT), f.hint
    # in a stored log of a `process` deployment (`<epoch> <line>`) and a journal (`-o short`) alike
    stored = [f"{1780074000 + i}.5 {line}" for i, line in enumerate(DFLASH_CRASH)]
    f = replay(stored).state.failure
    assert f is not None and f.hint.startswith(DFLASH_HINT), f.hint
    journal = [f"May 29 17:0{i % 10}:00 dflash-train python3[106324]: {line}" for i, line in enumerate(DFLASH_CRASH)]
    f = replay(journal).state.failure
    assert f is not None and f.hint.startswith(DFLASH_HINT), f.hint


def test_replay_reads_vllm_non_default_args_of_a_real_log() -> None:
    r = replay((ROOT / "tests" / "fixtures" / "logs" / "vllm_v010_starting_args.log").read_text().splitlines())
    assert r.preset == "vllm" and r.as_dict()["flags"] == {"tensor-parallel-size": "2"}


def test_server_args_lines_become_the_options_they_came_from() -> None:
    assert argv_from_line(SGLANG_LINE) == ("--model-path", "m", "--tp-size", "8", "--disable-cuda-graph",
                                           "--cuda-graph-bs", "[1,2]", "--json-model-override-args", "{}")
    # vLLM's `model_tag` is `vllm serve MODEL`'s positional: the model, first, never a `--model-tag` option
    assert argv_from_line(VLLM_DICT) == ("Qwen/Qwen3-8B", "--tensor-parallel-size", "2",
                                         "--enforce-eager", "--speculative-config",
                                         '{"method":"dflash","num_speculative_tokens":8}')
    assert argv_from_line(VLLM_NAMESPACE) == ("--port", "8000", "--model", "Qwen/Qwen2-7B",
                                              "--tensor-parallel-size", "4", "--max-model-len", "4096")
    # a value that is no literal (an enum's repr) costs that field only
    fields = fields_from_line("server_args=ServerArgs(tp_size=2, load_format=<LoadFormat.AUTO: 'auto'>, "
                              "speculative_algorithm='NGRAM')")
    assert fields == {"tp_size": 2, "speculative_algorithm": "NGRAM"}
    assert argv_from_fields({"a_b": 1.5, "c": False, "d": None, "e": True}) == ("--a-b", "1.5", "--e")
    for other in ("Load weight begin. avail mem=94.00 GB", "args: nothing here", "server_args=", ""):
        assert argv_from_line(other) is None, other


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["", "server_args=ServerArgs(", "non-default args: {",
                                                "args: Namespace("]))
def test_server_args_parsing_never_raises(text: str, head: str) -> None:
    argv = argv_from_line(head + text)
    assert argv is None or all(isinstance(a, str) for a in argv)
