"""One way server text is cut into lines (issue 47.2, tui/guard/text.py): `str.splitlines()` also ends a line at
\\x1c, \\x1d, \\x1e, \\x85, \\u2028 (and \\x0b, \\x0c, \\u2029), so a server that prints one inside a line makes a
second line of its choosing: the process manager's read-back parsed it as `<epoch> text`, with the server's epoch.
This fails on any `.splitlines(` call in the product code but the splitter's own module; the instruments (the
simulated server, the facts extractor) are not product code."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"tui/guard/text.py"}
INSTRUMENTS = ("tui/sim/", "tui/serverfacts/")


def splitlines_calls() -> list[str]:
    found = []
    for base in ("tui", "widgets"):
        for path in sorted((ROOT / base).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED or rel.startswith(INSTRUMENTS):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr == "splitlines":
                    found.append(f"{rel}:{node.lineno}")
    return found


def test_no_line_of_outside_text_is_cut_but_by_the_one_splitter() -> None:
    found = splitlines_calls()
    assert not found, ("str.splitlines() also cuts at \\x1c \\x1d \\x1e \\x85 \\u2028: use "
                       "tui.guard.text.split_lines at " + ", ".join(found))


def test_the_scan_finds_a_call() -> None:
    tree = ast.parse("x = text.splitlines()\n")
    assert any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "splitlines"
               for n in ast.walk(tree))
