"""The one line splitter and the one number parser (tui/guard/text.py, tui/guard/numbers.py; issue 47.2 and 47.5):
what they cut and take, and, above all, what they refuse."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.guard.numbers import (
    BadNumber,
    FromText,
    config_real,
    config_whole,
    epoch,
    real,
    real_or_none,
    seconds,
    whole,
    whole_or_none,
)
from tui.guard.text import split_byte_lines, split_lines

#: the characters str.splitlines() also ends a line at
FORGED_ENDS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


@pytest.mark.parametrize("sep", FORGED_ENDS)
def test_a_line_is_cut_at_real_line_ends_only(sep: str) -> None:
    line = f"1765000000.000000 boom{sep}inf The server is fired up and ready to roll!"
    assert len(line.splitlines()) == 2  # what the read-back did
    assert split_lines(line + "\n") == [line]
    assert split_byte_lines((line + "\n").encode()) == [line.encode()]


def test_the_three_line_ends_and_the_edges() -> None:
    assert split_lines("a\r\nb\rc\nd") == ["a", "b", "c", "d"]
    assert split_lines("") == [] and split_lines("\n") == [""] and split_lines("a\n\nb\n") == ["a", "", "b"]
    assert split_byte_lines(b"a\r\nb\n") == [b"a", b"b"] and split_byte_lines(b"") == []


@given(st.text(alphabet=st.sampled_from(["a", " ", "\n", "\r", *FORGED_ENDS])))
def test_split_lines_is_splitlines_where_the_only_ends_are_real_ones(text: str) -> None:
    plain = "".join(c if c not in FORGED_ENDS else "x" for c in text)
    assert split_lines(plain) == plain.splitlines()


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "NaN", "Infinity", "1e999", "-1e999", "0x10", "1_0", "",
                                  "١٢", "12abc", "true"])
def test_text_that_python_reads_as_a_number_but_no_one_means_is_refused(text: str) -> None:
    with pytest.raises(BadNumber):
        real(text, "stamp", text=True)
    assert real_or_none(text, text=True) is None


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, True, False, "10", None, [1], 10**400])
def test_values_that_are_no_finite_number_are_refused(value: object) -> None:
    with pytest.raises(BadNumber):
        real(value, "x")


def test_the_numbers_taken_and_the_ranges() -> None:
    assert real("1765000000.123456", "stamp", text=True) == 1765000000.123456
    assert real(" -3.5 ", "x", text=True) == -3.5 and real(2, "x") == 2.0 and real(".5e1", "x", text=True) == 5.0
    assert epoch(1765000000, "at") == 1765000000.0
    with pytest.raises(BadNumber, match=r"at: 1e\+10 is out of range"):
        epoch(1e10, "at")
    with pytest.raises(BadNumber, match="out of range"):
        seconds(-1, "seconds")
    assert whole(7, "pid") == 7 and whole("42", "pid", text=True) == 42
    for bad in (True, 3.0, "3", "3.5"):
        with pytest.raises(BadNumber):
            whole(bad, "pid")
    assert whole_or_none("x", text=True) is None and whole_or_none(5, low=1, high=4) is None


def test_one_clear_line_says_what_the_number_was_for() -> None:
    with pytest.raises(BadNumber) as e:
        real(True, "release_timeout_s")
    assert str(e.value) == "release_timeout_s: true is a true/false, not a number"
    with pytest.raises(BadNumber) as e:
        real("10", "release_timeout_s")
    assert str(e.value) == "release_timeout_s: '10' is text, not a number (write it without quotes)"
    assert isinstance(e.value, ValueError)  # the readers that skip a bad record skip it


def test_a_config_number_is_a_toml_number_or_an_environment_variables_digits() -> None:
    assert config_real(10) == 10.0 and config_real(FromText("2.5")) == 2.5 and config_whole(FromText("8")) == 8
    for bad in (True, "10", math.inf, FromText("inf"), FromText("true")):
        with pytest.raises(ValueError):
            config_real(bad)
    for bad in (True, 3.0, "3", FromText("3.0")):
        with pytest.raises(ValueError):
            config_whole(bad)
