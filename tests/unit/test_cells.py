"""The cells a new line differs in (widgets/cells.py): what a widget marks dirty instead of its whole line."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style

from widgets.cells import GAP, cells, changed_runs

BOLD, DIM = Style(bold=True), Style(dim=True)


def test_one_figure_changed_is_one_run_of_its_cells() -> None:
    old = [("for ", BOLD), ("21.5s", BOLD), ("  run 49e5c022", DIM)]
    new = [("for ", BOLD), ("22.5s", BOLD), ("  run 49e5c022", DIM)]
    assert changed_runs(old, new) == [(5, 6)]


def test_a_style_change_alone_is_a_change() -> None:
    assert changed_runs([("ready", BOLD)], [("ready", DIM)]) == [(0, 5)]


def test_runs_closer_than_the_gap_are_one_and_farther_ones_are_not() -> None:
    base = "x" * 40
    near = "y" + base[1:4] + "y" + base[5:]
    assert changed_runs([(base, None)], [(near, None)]) == [(0, 5)]
    far = "y" + base[1:GAP + 2] + "y" + base[GAP + 3:]
    assert changed_runs([(base, None)], [(far, None)]) == [(0, 1), (GAP + 2, GAP + 3)]


def test_a_shorter_or_longer_line_differs_in_the_cells_only_one_has() -> None:
    assert changed_runs([("abcdef", None)], [("abc", None)]) == [(3, 6)]
    assert changed_runs([("abc", None)], [("abcdef", None)]) == [(3, 6)]
    assert changed_runs([], [("ab", None)]) == [(0, 2)]
    assert changed_runs([("same", None)], [("same", None)]) == []


def test_wide_characters_take_their_cells_and_segments_are_read_as_pieces() -> None:
    assert cells([("日x", None)]) == [("日", None), ("", None), ("x", None)]
    old = [Segment("GPU 日本 ", DIM), Segment("482 W", BOLD)]
    new = [Segment("GPU 日本 ", DIM), Segment("484 W", BOLD)]
    assert changed_runs(old, new) == [(11, 12)]  # "GPU " 4 + two wide characters 4 + " " 1, then "48" and "4"
