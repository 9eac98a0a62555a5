"""Counted words: "1 configuration", "2 configurations", never "1 configurations". Pure, no imports: any layer
may use it (the engine's notes, the CLI's lines, the console's toasts)."""

from __future__ import annotations


def noun(n: float, word: str, many: str | None = None) -> str:
    """`word` as `n` of it reads: singular for exactly one, else the plural (`many`, or `word` + "s"; a phrase's
    last word takes the "s": "pending flag change" -> "pending flag changes")."""
    return word if n == 1 else many if many is not None else word + "s"


def plural(n: float, word: str, many: str | None = None) -> str:
    """`n` and the word as that count reads: `plural(1, "request")` -> "1 request", `plural(3, "request")` ->
    "3 requests", `plural(2, "entry", "entries")` -> "2 entries"."""
    count = f"{n:,}" if isinstance(n, int) else f"{n:g}"
    return f"{count} {noun(n, word, many)}"
