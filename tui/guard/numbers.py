"""The one way a number from outside is taken (issue 47.5): from a server's line, a file bringup wrote earlier
(the run history, a record, the process manager's run record and log stamps), a config, a sweep plan.

Python takes more than anyone means: `float("inf")`, `float("nan")`, `float("Infinity")`, `float("1_0")`,
`json.loads("Infinity")`, and `True` wherever a number is asked (`True + 1 == 2`). Each has reached bringup from
outside: a server's `inf` stamp put Infinity in the run history and crashed every later `wait` (OverflowError), a
plan's `duration_s = inf` ran a sweep cell forever, a config's `release_timeout_s = true` was a 1 s timeout. So a
number from outside is taken here, and here it is:

- a real number: an int or a float, never a bool; text only where text is all there is (a log's stamp, an
  environment variable), and then only plain decimal digits (`12`, `-3.5`, `1e3`), never `inf`, `nan`, `0x10`,
  `1_000` or a word;
- finite, and within the range the caller names (an epoch between 1970 and 2200, seconds up to a year...).

Anything else is refused with one line naming what it was for, what it was and what was expected (`BadNumber`,
a `ValueError`, so the readers that skip a bad record skip it). `real_or_none` / `whole_or_none` are the same rule
for a reader that drops what it cannot take (a log line, a /metrics sample). Pydantic-free: the config's number
types (tui/config/parts.py `Real`, `Whole`) call `config_real` / `config_whole`.
"""

from __future__ import annotations

import math
import re

from tui.errors import PermanentError

#: an epoch stamp: from 1970 to the year 2200 (a stamp outside is no moment this program saw)
EPOCH_MIN = 0.0
EPOCH_MAX = 7_258_118_400.0
#: a duration in seconds from outside: up to a year (longer is no timeout anyone meant, and some clocks refuse it)
MAX_SECONDS = 365 * 24 * 3600.0
#: the largest count or size taken (2**53: a float still holds every integer to there)
MAX_COUNT = float(1 << 53)
#: the same, as a whole number's bound
MAX_WHOLE = 1 << 53

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")


class BadNumber(PermanentError, ValueError):
    """A number from outside that is not one, not finite, or out of range: one line saying which."""


class FromText(str):
    """Text that can only be text (an environment variable's value): a number in it is read from its digits. Plain
    text where a config wants a number (`release_timeout_s = "10"` in TOML) is refused: a TOML number has no
    quotes."""

    __slots__ = ()


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _range(what: str, x: float, low: float | None, high: float | None) -> None:
    if (low is not None and x < low) or (high is not None and x > high):
        lo = "" if low is None else f"{low:g}"
        hi = "" if high is None else f"{high:g}"
        raise BadNumber(f"{what}: {x:g} is out of range ({lo}..{hi})")


def real(value: object, what: str, *, low: float | None = None, high: float | None = None,
         text: bool = False) -> float:
    """`value` as a finite float within [low, high]. An int or a float, never a bool; a str only when `text` (then
    plain decimal digits only). Raises BadNumber."""
    if isinstance(value, bool):
        raise BadNumber(f"{what}: {str(value).lower()} is a true/false, not a number")
    if isinstance(value, int | float):
        try:
            x = float(value)
        except OverflowError:  # an int too big for a float
            raise BadNumber(f"{what}: {_show(value)} is out of range") from None
    elif isinstance(value, str) and text:
        s = value.strip()
        if not _DECIMAL.fullmatch(s):
            raise BadNumber(f"{what}: {_show(value)} is not a number (plain digits, e.g. 12 or 2.5)")
        x = float(s)
    elif isinstance(value, str):
        raise BadNumber(f"{what}: {_show(value)} is text, not a number (write it without quotes)")
    else:
        raise BadNumber(f"{what}: {_show(value)} is not a number")
    if not math.isfinite(x):
        raise BadNumber(f"{what}: {_show(value)} is not a finite number")
    _range(what, x, low, high)
    return x


def whole(value: object, what: str, *, low: int | None = None, high: int | None = None, text: bool = False) -> int:
    """`value` as an int within [low, high]: an int (never a bool, never a float, even 3.0); a str only when `text`
    (then plain digits only). Raises BadNumber."""
    if isinstance(value, bool):
        raise BadNumber(f"{what}: {str(value).lower()} is a true/false, not a whole number")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and text:
        s = value.strip()
        if not _INTEGER.fullmatch(s) or len(s) > 20:
            raise BadNumber(f"{what}: {_show(value)} is not a whole number (plain digits, e.g. 12)")
        n = int(s)
    elif isinstance(value, str):
        raise BadNumber(f"{what}: {_show(value)} is text, not a number (write it without quotes)")
    else:
        raise BadNumber(f"{what}: {_show(value)} is not a whole number")
    _range(what, n, low, high)
    return n


def real_or_none(value: object, *, low: float | None = None, high: float | None = None,
                 text: bool = False) -> float | None:
    """`real`, or None where it would refuse: for a reader that drops what it cannot take."""
    try:
        return real(value, "", low=low, high=high, text=text)
    except BadNumber:
        return None


def whole_or_none(value: object, *, low: int | None = None, high: int | None = None,
                  text: bool = False) -> int | None:
    """`whole`, or None where it would refuse."""
    try:
        return whole(value, "", low=low, high=high, text=text)
    except BadNumber:
        return None


def epoch(value: object, what: str, *, text: bool = False) -> float:
    """A moment (seconds since 1970) from a file or a line: finite, between 1970 and 2200."""
    return real(value, what, low=EPOCH_MIN, high=EPOCH_MAX, text=text)


def epoch_or_none(value: object) -> float | None:
    """A moment as `epoch` takes it, from digits in text or a number, or None where it would refuse: for a reader
    that drops a line or a field it cannot take."""
    return real_or_none(value, low=EPOCH_MIN, high=EPOCH_MAX, text=True)


def seconds(value: object, what: str, *, text: bool = False) -> float:
    """A duration from a file or a plan: finite, 0 up to a year."""
    return real(value, what, low=0.0, high=MAX_SECONDS, text=text)


# ---------------------------------------------------------------- the config's number types (pydantic-free)


def config_real(value: object) -> float:
    """A config's float (before pydantic's own checks, which add the key's bounds): a TOML number (int or float),
    or an environment variable's digits; never a bool, text in quotes, an infinity or a NaN."""
    try:
        return real(value, "", text=isinstance(value, FromText))
    except BadNumber as e:
        raise ValueError(_said(e)) from None


def config_whole(value: object) -> int:
    """A config's int: a TOML integer, or an environment variable's digits; never a bool, a float or quoted text."""
    try:
        return whole(value, "", text=isinstance(value, FromText))
    except BadNumber as e:
        raise ValueError(_said(e)) from None


def _said(e: BadNumber) -> str:
    """The message without its empty subject: pydantic names the key."""
    return str(e).removeprefix(": ")
