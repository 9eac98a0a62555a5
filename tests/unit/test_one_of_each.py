"""One of each (issue 49, item 8): one duration notation (`tui/words.py`) that every panel, row and report uses,
and one key bar (`widgets/keybar.py`) that the console's and the overview's screens fit their keys with."""

from __future__ import annotations

import ast
from pathlib import Path

from rich.text import Text

from tui.words import duration
from widgets import keybar
from widgets.keybar import BarKey

ROOT = Path(__file__).resolve().parents[2]


def test_one_notation_of_a_duration() -> None:
    assert [duration(s) for s in (-3, 4.25, 59.9, 65, 3725)] == ["0.0s", "4.2s", "59.9s", "1m05s", "1h02m"]
    assert [duration(s, tenths_below=10) for s in (4.25, 42.4)] == ["4.2s", "42s"]
    assert [duration(s, resting=True) for s in (42.3, 65, 3725)] == ["42.3s", "1m", "1h02m"]
    assert [duration(s, spoken=True) for s in (42.4, 600, 5460)] == ["42 s", "10 min", "1 h 31 min"]


def test_no_module_formats_minutes_and_seconds_of_its_own() -> None:
    """Every `{m}m{sec:02d}s` of the product is the one in tui/words.py: a second notation is how seven began."""
    found = []
    for p in [*sorted((ROOT / "tui").rglob("*.py")), *sorted((ROOT / "widgets").rglob("*.py"))]:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr) and "m{" in ast.unparse(node) and "02d}" in ast.unparse(node):
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert [f for f in found if not f.startswith("tui/words.py")] == []


def _draw(keys: list[BarKey]) -> Text:
    t = Text()
    for k in keys:
        t.append(f" {k.key} {k.label} ")
    return t


KEYS = [BarKey("restart", "r", "restart"), BarKey("pick", "d", "deployments"), BarKey("quit", "q", "quit")]


def test_the_bar_takes_the_first_layout_that_fits() -> None:
    def short(keys: list[BarKey]) -> list[BarKey]:
        return [BarKey(k.id, k.key, k.label[:1]) for k in keys]

    layouts = [(keybar.as_is, _draw), (short, _draw)]
    assert keybar.fit(KEYS, 200, layouts, ["pick"]).plain == " r restart  d deployments  q quit "
    assert keybar.fit(KEYS, 20, layouts, ["pick"]).plain == " r r  d d  q q "


def test_where_nothing_fits_the_least_needed_keys_leave_whole() -> None:
    t = keybar.fit(KEYS, 20, [(keybar.as_is, _draw)], ["pick", "restart"])
    assert t.plain == " r restart  q quit "  # `pick` left, whole; `restart` stays: the bar fits
    assert keybar.fit(KEYS, 5, [(keybar.as_is, _draw)], ["pick", "restart"]).plain == " q quit "
