"""The record's and the ETA's words say what they mean (issue 51, finding 8): `last run with the same flags but
--tp-size 2.2s` read as a --tp-size of 2.2s; `usual (... but --x, 1)` as a flag of 1; a phase the compared runs
skipped showed `0.0s (0.0s-0.0s)`."""

from __future__ import annotations

from tui.lifecycle.eta import based_on_words
from tui.lifecycle.incident import usual_header, usual_words
from tui.model import EtaBasis, EtaMatch


def test_the_flag_apart_is_never_followed_by_a_figure() -> None:
    words = based_on_words(EtaBasis(1, EtaMatch.ONE_FLAG_APART, 2.2, 2.2, "--tp-size"))
    assert words == "last run 2.2s (flags as these but --tp-size)"


def test_the_usual_header_says_its_count_as_a_count() -> None:
    cmp = {"runs": 1, "one_flag_apart": "--cuda-graph-backend-decode/--cuda-graph-backend-prefill"}
    assert usual_header(cmp) == ("usual (the past ready run that differs only in "
                                 "--cuda-graph-backend-decode/--cuda-graph-backend-prefill)")
    assert usual_header({"runs": 3, "one_flag_apart": None}) == "usual (the 3 past ready runs with these flags)"


def test_a_phase_the_compared_runs_skipped_is_said_so() -> None:
    assert usual_words({"usual_s": 0.0, "range_s": [0.0, 0.0]}) == "skipped by them"
    assert usual_words({"usual_s": 8.2, "range_s": [8.2, 8.2]}) == "8.2s"
    assert usual_words({"usual_s": 70.0, "range_s": [60.0, 80.0]}) == "1m10s (1m00s-1m20s)"
