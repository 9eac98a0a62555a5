"""Flag editing on argv lists (tui/lifecycle/flags.py) and value validation (FlagSpec.validate in
tui/lifecycle/presets/__init__.py). Flag names and kinds follow the SGLang 0.5.23 and vLLM 0.33 command lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.lifecycle.flags import FlagChange, apply_changes, current_values, diff, find_spec, parse_changes
from tui.lifecycle.presets import FlagSpec, FlagValueError, get_preset

SG = get_preset("sglang").flags
VL = get_preset("vllm").flags

# the K2.6 DFlash unit's command line
ARGV = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/root/models/Kimi-K2.6",
        "--tp", "8", "--ep-size=8", "--speculative-algorithm=EAGLE", "--enable-metrics", "--port", "30001"]


def test_current_values_reads_both_forms_and_aliases() -> None:
    assert current_values(ARGV, SG) == {"tp-size": "8", "ep-size": "8", "speculative-algorithm": "EAGLE",
                                        "enable-metrics": None}


def test_current_values_ignores_unknown_options_and_positionals() -> None:
    assert current_values(["vllm", "serve", "Qwen/Qwen3-8B", "--enforce-eager", "--port", "8000",
                           "--gpu-memory-utilization=0.9"], VL) == {"enforce-eager": None,
                                                                     "gpu-memory-utilization": "0.9"}


def test_set_replaces_alias_and_equals_forms() -> None:
    changes = parse_changes(["tp-size=4", "speculative-algorithm=dflash"], [], SG)
    new = apply_changes(ARGV, changes, SG)
    assert "--tp" not in new
    assert not any(a.startswith("--speculative-algorithm=") for a in new)
    assert new.count("--tp-size") == 1
    assert new[new.index("--tp-size") + 1] == "4"
    assert new[new.index("--speculative-algorithm") + 1] == "DFLASH", "choices are canonicalised"
    # everything else is kept, in order
    assert new[:5] == ARGV[:5]
    assert "--ep-size=8" in new
    assert new[new.index("--port") + 1] == "30001"
    assert current_values(new, SG) == {"tp-size": "4", "ep-size": "8", "speculative-algorithm": "DFLASH",
                                       "enable-metrics": None}


@pytest.mark.parametrize("alias", ["tp", "--tp", "tensor-parallel-size", "--tensor-parallel-size", "tp-size"])
def test_aliases_find_the_same_flag(alias: str) -> None:
    assert find_spec(alias, SG).name == "tp-size"
    changes = parse_changes([f"{alias}=2"], [], SG)
    assert changes == [FlagChange("tp-size", "2")]


def test_tensor_parallel_size_equals_form_is_replaced() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--tensor-parallel-size=2", "--model-path", "m"]
    new = apply_changes(argv, parse_changes(["tp=4"], [], SG), SG)
    assert new == ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "4"]


def test_vllm_tp_alias() -> None:
    assert find_spec("--tp", VL).name == "tensor-parallel-size"
    new = apply_changes(["vllm", "serve", "m", "--tp", "8"], parse_changes(["tp=4"], [], VL), VL)
    assert new == ["vllm", "serve", "m", "--tensor-parallel-size", "4"]


def test_vllm_single_dash_tp_is_recognised() -> None:
    # per the released wheels: `-tp`/`--tensor-parallel-size`; regression: `-tp 8` used to survive `--set tp=4`
    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "8"]
    assert current_values(argv, VL) == {"tensor-parallel-size": "8"}
    new = apply_changes(argv, parse_changes(["tp=4"], [], VL), VL)
    assert "-tp" not in new


# ------------------------------------------------------------------------------------------------ bools


def test_bool_set_true_and_false() -> None:
    on = apply_changes(ARGV, parse_changes(["disable-cuda-graph"], [], SG), SG)
    assert on.count("--disable-cuda-graph") == 1
    again = apply_changes(on, parse_changes(["disable-cuda-graph=true"], [], SG), SG)
    assert again.count("--disable-cuda-graph") == 1, "setting an existing switch does not duplicate it"
    off = apply_changes(again, parse_changes(["disable-cuda-graph=false"], [], SG), SG)
    assert "--disable-cuda-graph" not in off
    assert parse_changes(["enable-metrics=false"], [], SG) == [FlagChange("enable-metrics", None, remove=True)]
    assert parse_changes(["enable-metrics=0"], [], SG)[0].remove
    assert parse_changes(["enable-metrics=off"], [], SG)[0].remove


def test_bool_with_other_value_is_refused() -> None:
    with pytest.raises(FlagValueError, match="switch"):
        parse_changes(["disable-cuda-graph=maybe"], [], SG)


def test_unset_removes_every_occurrence_and_is_a_noop_when_absent() -> None:
    new = apply_changes(ARGV, parse_changes([], ["enable-metrics", "tp"], SG), SG)
    assert "--enable-metrics" not in new
    assert new == ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/root/models/Kimi-K2.6",
                   "--ep-size=8", "--speculative-algorithm=EAGLE", "--port", "30001"]
    assert apply_changes(["a", "--enable-metrics", "--enable-metrics"],
                         parse_changes([], ["enable-metrics"], SG), SG) == ["a"]
    # absent: nothing changes
    assert apply_changes(ARGV, parse_changes([], ["disable-cuda-graph"], SG), SG) == ARGV
    assert apply_changes(ARGV, parse_changes(["skip-server-warmup=false"], [], SG), SG) == ARGV


def test_unknown_flag_is_refused_with_suggestion() -> None:
    with pytest.raises(FlagValueError, match="unknown flag 'bogus'"):
        parse_changes(["bogus"], [], SG)
    with pytest.raises(FlagValueError, match="disable-cuda-graph"):
        parse_changes([], ["disable-cuda"], SG)
    with pytest.raises(FlagValueError):
        parse_changes(["enforce-eager"], [], SG)  # a vLLM flag on an SGLang deployment


# ------------------------------------------------------------------------------------------------ validation

_PATH = next(f for f in SG if f.name == "speculative-draft-model-path")


@pytest.mark.parametrize("value", [
    "model;reboot", "$(reboot)", "${HOME}", "`id`", "a b", "a\nb", "a|b", "a&&b", "a>b", "a<b", "'quoted'",
    '"quoted"', "a\\b", "a\tb", "a\rb", "*", "?", "-rf", "--other-flag", "", "x" * 600, "é",
])
def test_shell_metacharacters_refused(value: str) -> None:
    with pytest.raises(FlagValueError):
        _PATH.validate(value)
    with pytest.raises(FlagValueError):
        parse_changes([f"speculative-draft-model-path={value}"], [], SG)


@pytest.mark.parametrize("value", ["/root/models/draft\n", "8\n;id", "\n"])
def test_trailing_newline_refused(value: str) -> None:
    # `^...$` would let one final newline through (`$` matches before it): it must be refused
    with pytest.raises(FlagValueError):
        _PATH.validate(value)


@pytest.mark.parametrize("value", ["/root/models/Kimi-K2.6-DFlash-tmp-long", "SubSir/Kimi-K2.6-DFlash",
                                   "hf:org/model@v1.0", "a=b,c%d~e+f"])
def test_safe_values_accepted(value: str) -> None:
    assert _PATH.validate(value) == value


@pytest.mark.parametrize(("name", "value"), [
    ("tp-size", "8;reboot"), ("tp-size", "0"), ("tp-size", "65"), ("tp-size", "1.5"), ("tp-size", "0x8"),
    ("mem-fraction-static", "nan"), ("mem-fraction-static", "inf"), ("mem-fraction-static", "1.5"),
    ("mem-fraction-static", "0.8; id"), ("speculative-algorithm", "DFLASH;id"), ("speculative-algorithm", "ddtree"),
    ("cuda-graph-backend-decode", "$(id)"),
])
def test_typed_values_refused(name: str, value: str) -> None:
    with pytest.raises(FlagValueError):
        parse_changes([f"{name}={value}"], [], SG)


def test_typed_values_canonicalised() -> None:
    assert parse_changes(["tp=08"], [], SG)[0].value == "8"
    assert parse_changes(["mem-fraction-static= 0.85 "], [], SG)[0].value == "0.85"
    assert parse_changes(["speculative-algorithm=eagle3"], [], SG)[0].value == "EAGLE3"
    assert parse_changes(["cuda-graph-backend-decode=Disabled"], [], SG)[0].value == "disabled"


def test_value_flag_needs_a_value() -> None:
    with pytest.raises(FlagValueError, match="needs a value"):
        parse_changes(["tp-size"], [], SG)
    with pytest.raises(FlagValueError, match="needs a value"):
        parse_changes(["speculative-draft-model-path="], [], SG)


_SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:@+=,%~-")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_validated_str_values_contain_only_safe_characters(value: str) -> None:
    spec = FlagSpec("x", "str")
    try:
        out = spec.validate(value)
    except FlagValueError:
        return
    assert out is not None
    assert set(out) <= _SAFE
    assert not out.startswith("-")


# ------------------------------------------------------------------------------------------------ diff


def test_diff_lists_added_removed_changed() -> None:
    new = apply_changes(ARGV, parse_changes(["tp=4", "disable-cuda-graph"], ["enable-metrics"], SG), SG)
    assert diff(ARGV, new, SG) == ["+ --disable-cuda-graph", "- --enable-metrics", "~ --tp-size 8 -> 4"]


def test_diff_of_identical_argv_is_empty_and_other_changes_are_noted() -> None:
    assert diff(ARGV, list(ARGV), SG) == []
    other = [*ARGV[:-1], "30002"]
    assert diff(ARGV, other, SG) == ["~ other arguments changed"]
