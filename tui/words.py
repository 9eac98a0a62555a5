"""Counted words: "1 configuration", "2 configurations", never "1 configurations"; and the one notation of a
duration (`duration`). Pure, nothing of the project imported: any layer may use it (the engine's notes, the CLI's
lines, the console's panels and toasts)."""

from __future__ import annotations

import math


def noun(n: float, word: str, many: str | None = None) -> str:
    """`word` as `n` of it reads: singular for exactly one, else the plural (`many`, or `word` + "s"; a phrase's
    last word takes the "s": "pending flag change" -> "pending flag changes")."""
    return word if n == 1 else many if many is not None else word + "s"


def plural(n: float, word: str, many: str | None = None) -> str:
    """`n` and the word as that count reads: `plural(1, "request")` -> "1 request", `plural(3, "request")` ->
    "3 requests", `plural(2, "entry", "entries")` -> "2 entries"."""
    count = f"{n:,}" if isinstance(n, int) else f"{n:g}"
    return f"{count} {noun(n, word, many)}"


def duration(s: float, *, tenths_below: float = 60.0, resting: bool = False, spoken: bool = False) -> str:
    """The one notation of a duration, so that a phase's age, an ETA, a row's time and a sample's age read alike.

    Compact (the default): `42.3s` (tenths below `tenths_below` seconds, whole seconds above), `2m30s`, `2h05m`;
    `resting`: a phase that rests (ready, failed, stopped) counts whole minutes after its first, `2m`, so that a
    console left open redraws it once a minute, not every second. `spoken`: in words' units, for a sentence or a
    column read at a glance, `42 s`, `3 min`, `1 h 05 min`. Negative durations (a clock stepped back) read as 0."""
    s = max(0.0, s)
    if spoken:
        if s < 90:
            return f"{s:.0f} s"
        if s < 90 * 60:
            return f"{s / 60:.0f} min"
        return f"{s // 3600:.0f} h {s % 3600 / 60:02.0f} min"
    if s < 60:
        return f"{s:.1f}s" if s < tenths_below else f"{s:.0f}s"
    m, sec = divmod(math.floor(s), 60)
    if m >= 60:
        return f"{m // 60}h{m % 60:02d}m"
    return f"{m}m" if resting else f"{m}m{sec:02d}s"
