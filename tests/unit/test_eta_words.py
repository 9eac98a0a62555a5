"""The ETA's words as an operator reads them (issue 51, item 7): one `g` press on SGLang 0.5.23 (two flags written,
decode and prefill) is one change, so the runs before it are "one flag apart"; flags the deployment hides from its
command line (the demo simulator's `--scenario`, `--port`) are never compared nor named; a spread whose two ends
read the same is one figure ("28s", not "28s-28s"); and a wrap never leaves a "%" alone on a line."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text

from tests.helpers.past_runs import ARGV, NOW_START, history
from tui.lifecycle.eta import based_on_words, estimate, eta_words, key_groups
from tui.lifecycle.history import options
from tui.lifecycle.presets import get_preset
from tui.lifecycle.presets.per_release import release_preset
from tui.model import EtaBasis, EtaMatch, Phase, PhaseEta, Transition

GRAPHS_OFF = ("--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled")


def _loading_eta(argv: tuple[str, ...], elapsed: float = 30.0, **kw: object) -> object:
    tl = [Transition(Phase.STARTING, NOW_START), Transition(Phase.LOADING, NOW_START + 5)]
    return estimate(history(), deployment="k26", invocation="now", flags=options(argv), phase=Phase.LOADING,
                    timeline=tl, now=tl[-1].at + elapsed, **kw)  # type: ignore[arg-type]


def test_one_key_toggle_writing_two_flags_is_one_flag_apart() -> None:
    sglang = release_preset(get_preset("sglang"), "0.5.23")
    g = next(f for f in sglang.flags if f.key == "g")
    assert g.companions, g  # the premise: `g` on 0.5.23 writes decode and prefill
    together = key_groups(get_preset("sglang").flags)
    e = _loading_eta((*ARGV, *GRAPHS_OFF), together=together)
    assert isinstance(e, PhaseEta), e
    assert e.basis.match == EtaMatch.ONE_FLAG_APART and e.basis.runs == 3
    assert "--cuda-graph-backend-decode/--cuda-graph-backend-prefill" in eta_words(e)


def test_two_unrelated_flags_apart_are_still_no_eta() -> None:
    e = _loading_eta((*ARGV, "--disable-cuda-graph", "--mem-fraction-static", "0.8"),
                     together=key_groups(get_preset("sglang").flags))
    assert not isinstance(e, PhaseEta)


@pytest.mark.parametrize("hidden_args", [("--scenario", "slow-load"), ("--port", "31001"),
                                         ("--scenario", "slow-load", "--port", "31001")])
def test_flags_the_command_line_hides_are_not_compared(hidden_args: tuple[str, ...]) -> None:
    e = _loading_eta((*ARGV, *hidden_args), hidden=("--sim-", "--time-scale", "--scenario", "--port"))
    assert isinstance(e, PhaseEta) and e.basis.match == EtaMatch.SAME_FLAGS, e
    assert "--scenario" not in eta_words(e) and "--port" not in eta_words(e)


def test_a_spread_whose_ends_read_the_same_is_one_figure() -> None:
    assert based_on_words(EtaBasis(2, EtaMatch.SAME_FLAGS, 28.2, 28.4, "")) == "last 2 runs 28s"
    assert based_on_words(EtaBasis(2, EtaMatch.SAME_FLAGS, 28.0, 31.0, "")) == "last 2 runs 28s-31s"


def test_a_wrap_never_leaves_a_percent_sign_alone() -> None:
    bar = "Loading safetensors checkpoint shards:  37% Completed | 24/64 [05:00<08:00,  0.08it/s]"
    e = _loading_eta(ARGV, elapsed=400.0, latest_line=bar)  # far slower than the usual 70 s
    assert isinstance(e, PhaseEta) and e.slower, e
    words = eta_words(e)
    console = Console(width=200, color_system=None)
    for width in range(12, len(words) + 1):
        for line in Text(words).wrap(console, width):
            assert not line.plain.lstrip().startswith("%"), (width, line.plain)
