"""Each release's spelling of a flag (tui/lifecycle/presets/per_release.py): SGLang 0.5.23 turns graphs off with both
backends and offers no removed flag, the graphs key writes what each release takes, the spelling every release
takes until the run says its release, a removed flag said so, vLLM's hint naming its release's capture flag. The
flags dialog using them: tests/console/test_release_flags.py."""

from __future__ import annotations

import re

import pytest

from tests.helpers.flag_view import Flags
from tui.lifecycle.presets import FlagSpec
from tui.lifecycle.presets.facts import releases, resolve
from tui.lifecycle.presets.registry import get_preset
from tui.lifecycle.replay import replay
from tui.model import FailureKind, Phase
from tui.ops.change import ChangePlan, ChangeRefused, Refusal, plan_change

SGLANG = get_preset("sglang")


def keys(specs: tuple[FlagSpec, ...] | list[FlagSpec]) -> dict[str, str]:
    return {f.key: f.name for f in specs if f.key}


# a vLLM start that says its release, then fails capturing CUDA graphs: the lines as the releases format them
# (vllm 0.10.2 entrypoints/openai/api_server.py `vLLM API server version %s`; 0.34.0 entrypoints/common/startup.py
# `vLLM server version %s, serving model %s`; v1/worker/gpu_model_runner.py's capture bar; v1/engine/core.py)
def vllm_capture_failure(version_line: str) -> list[str]:
    return [
        f"(APIServer pid=1) INFO 11-24 11:43:50 [api_server.py:1000] {version_line}",
        "(EngineCore_DP0 pid=441) INFO 11-24 11:43:54 [gpu_model_runner.py:3341] Model loading took 2.0513 GiB "
        "memory and 27.200487 seconds",
        "(EngineCore_DP0 pid=441) Capturing CUDA graphs (decode, FULL):  10%|█         | 7/67 [00:01<00:10,  5.81it/s]",
        "(EngineCore_DP0 pid=441) ERROR 11-24 11:44:10 [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP0 pid=441) ERROR 11-24 11:44:10 [core.py:708] Traceback (most recent call last):",
        "(EngineCore_DP0 pid=441) ERROR 11-24 11:44:10 [core.py:708] RuntimeError: CUDA error: operation failed due "
        "to a previous error during capture",
    ]


def test_sglang_0_5_23_turns_graphs_off_with_both_backends_and_offers_no_removed_flag() -> None:
    facts = resolve("sglang", "0.5.23").facts
    assert facts is not None and facts.option("--cuda-graph-max-bs") is None  # removed in 0.5.20
    old = facts.option("--disable-cuda-graph")
    assert old is not None and old.deprecated, "0.5.23 deprecates --disable-cuda-graph"
    p = SGLANG.for_release(facts)
    names = [f.name for f in p.flags]
    assert "cuda-graph-max-bs" not in names and "cuda-graph-max-bs-decode" in names
    g = next(f for f in p.flags if f.key == "g")
    assert (g.name, g.toggle_value, g.companions) == ("cuda-graph-backend-decode", "disabled",
                                                      ("cuda-graph-backend-prefill",))
    assert keys(p.flags)["g"] == "cuda-graph-backend-decode"
    hint = p.hint(FailureKind.CUDA_GRAPH, Phase.GRAPH_CAPTURE, {"speculative-algorithm": "DFLASH"})
    assert "--set cuda-graph-backend-decode=disabled --set cuda-graph-backend-prefill=disabled" in hint, hint
    tuned = p.hint(FailureKind.CUDA_GRAPH, Phase.GRAPH_CAPTURE, {})
    assert "--cuda-graph-max-bs-decode" in tuned and "--cuda-graph-max-bs " not in tuned, tuned


@pytest.mark.parametrize("version", [f.version for f in releases("sglang")])
def test_the_graphs_key_writes_what_each_release_takes(version: str) -> None:
    facts = resolve("sglang", version).facts
    assert facts is not None
    p = SGLANG.for_release(facts)
    g = keys(p.flags).get("g")
    old = facts.option("--disable-cuda-graph")
    if old is not None and not old.deprecated:
        assert g == "disable-cuda-graph", version
    else:
        assert g == "cuda-graph-backend-decode" and facts.option("--cuda-graph-backend-decode") is not None, version


def test_before_the_run_says_its_release_the_spelling_every_release_takes_is_used() -> None:
    p = SGLANG.for_version(None)
    assert keys(p.flags)["g"] == "disable-cuda-graph"
    assert "--set disable-cuda-graph" in p.hint(FailureKind.CUDA_GRAPH, Phase.GRAPH_CAPTURE,
                                                {"speculative-algorithm": "DFLASH"})
    assert all(f.name != "cuda-graph-max-bs" for f in p.flags)  # the newest's flags: it has none such


async def test_setting_a_flag_the_release_removed_says_so() -> None:
    facts = resolve("sglang", "0.5.23").facts
    offered = list(SGLANG.for_release(facts).flags)
    k26 = Flags("k26", ["python", "-m", "sglang.launch_server"], list(SGLANG.flags), offered, "SGLang 0.5.23")
    refused = await plan_change(k26, ["cuda-graph-max-bs=64"])
    assert isinstance(refused, ChangeRefused) and refused.reason is Refusal.OTHER_RELEASE
    assert re.search(r"--cuda-graph-max-bs is not a flag of SGLang 0\.5\.23", refused.message), refused
    assert isinstance(await plan_change(k26, ["cuda-graph-max-bs-decode=64"]), ChangePlan)


@pytest.mark.parametrize(("line", "flag", "not_flag"), [
    ("vLLM API server version 0.10.2", "--cuda-graph-sizes", "--max-cudagraph-capture-size"),
    ("vLLM server version 0.34.0, serving model Qwen/Qwen3-8B", "--max-cudagraph-capture-size", "--cuda-graph-sizes"),
])
def test_a_vllm_hint_names_the_capture_flag_of_the_release_the_run_said(line: str, flag: str, not_flag: str) -> None:
    r = replay(vllm_capture_failure(line), "vllm")
    f = r.state.failure
    assert f is not None and f.kind == FailureKind.CUDA_GRAPH, r.state
    assert flag in f.hint and not_flag not in f.hint, f.hint
    assert r.as_dict()["release"] == line.split("version ")[1].split(",")[0]  # `replay --json` says it too
