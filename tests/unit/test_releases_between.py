"""The releases in between go by their own facts (issue 48, item 4): SGLang 0.5.21 and 0.5.22, vLLM 0.31-0.33 once
fell back to an older release's facts, so bringup offered what the server refuses (0.5.22 dropped the
`tc_piecewise` CUDA graph backend) and hid what it deprecates (0.5.22: `--enable-dp-attention` for
`--attn-dp-size`)."""

from __future__ import annotations

import pytest

from tui.lifecycle.presets import FlagSpec, FlagValueError
from tui.lifecycle.presets.facts import resolve
from tui.lifecycle.presets.registry import get_preset
from tui.model import FailureKind, Phase

SGLANG = get_preset("sglang")
VLLM = get_preset("vllm")


@pytest.mark.parametrize(("server", "version"), [("sglang", "0.5.21"), ("sglang", "0.5.22"), ("vllm", "0.31.0"),
                                                 ("vllm", "0.32.0"), ("vllm", "0.33.0")])
def test_the_release_has_its_own_facts(server: str, version: str) -> None:
    m = resolve(server, version)
    assert m.exact and m.facts is not None and m.facts.version == version, m.note


def _backend(version: str) -> FlagSpec:
    p = SGLANG.for_version(version)
    return next(f for f in p.flags if f.name == "cuda-graph-backend-decode")


def test_sglang_0_5_22_refuses_the_tc_piecewise_backend_it_dropped() -> None:
    spec = _backend("0.5.22")
    with pytest.raises(FlagValueError, match="must be one of"):
        spec.validate("tc_piecewise")
    assert spec.validate("breakable") == "breakable"


def test_sglang_0_5_21_still_offers_tc_piecewise() -> None:
    assert _backend("0.5.21").validate("tc_piecewise") == "tc_piecewise"


def test_sglang_0_5_22_deprecates_dp_attention_for_attn_dp_size() -> None:
    old, new = resolve("sglang", "0.5.21").facts, resolve("sglang", "0.5.22").facts
    assert old is not None and new is not None
    was = old.option("--enable-dp-attention")
    now = new.option("--enable-dp-attention")
    assert was is not None and not was.deprecated and old.option("--attn-dp-size") is None
    assert now is not None and now.deprecated and "--attn-dp-size" in now.deprecated_note
    assert new.option("--attn-dp-size") is not None


@pytest.mark.parametrize("version", ["0.5.21", "0.5.22"])
def test_sglang_between_releases_graphs_key_and_hints_are_their_own(version: str) -> None:
    """0.5.21/0.5.22: `--disable-cuda-graph` is deprecated (since 0.5.15), `--cuda-graph-max-bs` gone (0.5.20): `g`
    writes both backends disabled, and the hints name `--cuda-graph-max-bs-decode`."""
    p = SGLANG.for_version(version)
    g = next(f for f in p.flags if f.key == "g")
    assert (g.name, g.toggle_value) == ("cuda-graph-backend-decode", "disabled")
    assert "cuda-graph-max-bs" not in {f.name for f in p.flags}
    hint = p.hint(FailureKind.CUDA_GRAPH, Phase.GRAPH_CAPTURE, {})
    assert "--cuda-graph-max-bs-decode" in hint and "--cuda-graph-max-bs " not in hint, hint


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0"])
def test_vllm_between_releases_hints_and_flags_are_their_own(version: str) -> None:
    facts = resolve("vllm", version).facts
    assert facts is not None and facts.version == version
    p = VLLM.for_version(version)
    for spec in p.flags:
        assert facts.option(spec.option) is not None, f"{version} offers {spec.option}"
    hint = p.hint(FailureKind.CUDA_GRAPH, Phase.GRAPH_CAPTURE, {})
    assert "--max-cudagraph-capture-size" in hint, hint
    cap = facts.option("--max-cudagraph-capture-size")
    assert cap is not None and not cap.deprecated  # deprecated only from 0.34.0
