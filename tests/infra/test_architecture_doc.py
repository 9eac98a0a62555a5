"""ARCHITECTURE.md's "Where to add things" names the one place for each kind of change: every path it names must
exist, so the list cannot drift from the tree (a module moved or renamed fails here until the list follows)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "ARCHITECTURE.md"
#: a path as the list writes one: relative to tui/ (`engine/core.py`), or to the repository (`tests/...`)
PATH = re.compile(r"`([\w./-]+\.(?:py|tcss))`|`([\w-]+/)`")


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def named_paths(text: str) -> list[str]:
    return [m[1] or m[2] for m in PATH.finditer(text)]


def exists(name: str) -> bool:
    # the list names a manager module by its file name in the managers item (`docker.py`)
    bases = (ROOT / "tui", ROOT / "tui" / "lifecycle", ROOT / "tui" / "managers", ROOT)
    return any((base / name).exists() for base in bases)


def test_every_place_the_list_names_exists() -> None:
    where = section(DOC.read_text(encoding="utf-8"), "Where to add things")
    names = named_paths(where)
    assert len(names) >= 20, names  # the list names its places (a list emptied by mistake is no check)
    for kind in ("A new server type", "A new way to run servers", "A new screen", "A new front end"):
        assert f"- {kind}" in where, kind
    missing = [n for n in names if not exists(n)]
    assert missing == [], f"ARCHITECTURE.md names places that do not exist: {missing}"


def test_the_check_notices_a_place_that_does_not_exist() -> None:
    names = named_paths("- A new thing: `engine/no_such_stream.py` beside `engine/core.py`")
    assert names == ["engine/no_such_stream.py", "engine/core.py"]
    assert [n for n in names if not exists(n)] == ["engine/no_such_stream.py"]
