"""One way server text is cut into lines (issue 47.2, tui/guard/text.py): `str.splitlines()` also ends a line at
\\x1c, \\x1d, \\x1e, \\x85, \\u2028 (and \\x0b, \\x0c, \\u2029), so a server that prints one inside a line makes a
second line of its choosing: the process manager's read-back parsed it as `<epoch> text`, with the server's epoch.

This fails on any reach for `splitlines` in the product code but the splitter's own module, not only a call:
`str.splitlines(t)`, `map(str.splitlines, xs)`, `f = t.splitlines`, `getattr(t, "splitlines")`,
`methodcaller("splitlines")` (an attribute named so, or a string that names it; a docstring may still say why it is
not used). The simulated server is an instrument, not product code (the facts extractor lives outside the package,
in tools/)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"tui/guard/text.py"}
INSTRUMENTS = ("tui/sim/",)
NAME = "splitlines"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, class or function (prose, which may name the method)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def reaches(tree: ast.AST) -> list[int]:
    """The lines of `tree` that reach for `splitlines`: an attribute so named (called or not), a name so bound (an
    import of it, an alias), or a string that names it outside a docstring."""
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        match node:
            case ast.Attribute(attr=name) | ast.Name(id=name) if name == NAME:
                found.append(node.lineno)
            case ast.alias() if NAME in (node.name, node.asname):
                found.append(node.lineno)
            case ast.Constant(value=str(text)) if NAME in text and id(node) not in docs:
                found.append(node.lineno)
    return found


def splitlines_calls() -> list[str]:
    found = []
    for base in ("tui", "widgets"):
        for path in sorted((ROOT / base).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED or rel.startswith(INSTRUMENTS):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
            found += [f"{rel}:{line}" for line in reaches(tree)]
    return found


def test_no_line_of_outside_text_is_cut_but_by_the_one_splitter() -> None:
    found = splitlines_calls()
    assert not found, ("str.splitlines() also cuts at \\x1c \\x1d \\x1e \\x85 \\u2028: use "
                       "tui.guard.text.split_lines at " + ", ".join(found))


@pytest.mark.parametrize("src", [
    "x = text.splitlines()\n",
    "x = str.splitlines(text)\n",
    "xs = list(map(str.splitlines, texts))\n",
    "f = text.splitlines\nx = f()\n",
    "x = getattr(text, 'splitlines')()\n",
    "x = operator.methodcaller('splitlines')(text)\n",
    "from somewhere import splitlines\n",
    "x = splitlines(text)\n",
    "def f(t):\n    \"\"\"Cut.\"\"\"\n    return t.splitlines(True)\n",
])
def test_the_scan_finds_every_reach(src: str) -> None:
    assert reaches(ast.parse(src))


@pytest.mark.parametrize("src", [
    '"""Not splitlines: it also cuts at \\\\x1c."""\nx = split_lines(text)\n',
    "def f(t):\n    \"\"\"Unlike str.splitlines, only three ends.\"\"\"\n    return split_lines(t)\n",
])
def test_prose_in_a_docstring_is_no_reach(src: str) -> None:
    assert not reaches(ast.parse(src))
