"""The one rule for secret flag values, as the domain and everything that records or shows a command line use it
(issue 29.4, issue 47).

bringup shows, exports and records command lines (the Prometheus `bringup_info{flags}` label, `status --json`, the
lock's record, a sweep's `sweep.json` and records, the run history, the incident record): each goes through
`redact_argv`, `redact_flags` or `redact_text` first, and a secret's value becomes `***`, so that a reader still
sees that the flag is set. Each is the name rule (`tui/guard/secret_names.py`: `--api-key`, `HF_TOKEN`, ...) and
then the one redactor (`tui/guard/redact.py`'s `scrub`: the values of flags the config declares secret, and every
secret value the process has learned, under any name or none), so that what a name cannot tell is hidden in every
record too. No I/O here: the redactor's book is memory the front ends fill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from tui.guard import secret_names
from tui.guard.redact import BOOK, scrub
from tui.guard.secret_names import REDACTED, is_secret, secret_values, unredact_argv

__all__ = ["REDACTED", "is_secret", "is_secret_flag", "redact_argv", "redact_flags", "redact_text", "redact_value",
           "secret_values", "unredact_argv"]

V = TypeVar("V")


def is_secret_flag(name: str) -> bool:
    """Whether a flag (`api-key`, `--api-key`) holds a secret: by the name rule, or because the config declares it
    secret (`secret_flags`)."""
    return is_secret(name) or ("--" + name.strip().lstrip("-")) in BOOK.declared


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line with every secret's value `***`: `--api-key V`, `--api-key=V`, `HF_TOKEN=V`, a declared
    secret flag's value, and any value the redactor knows."""
    return [scrub(a) for a in secret_names.redact_argv(argv, BOOK.declared)]


def redact_flags(flags: Mapping[str, V]) -> dict[str, V | str]:
    """A flags mapping (name without dashes -> value, None for an unset flag or a switch) with every secret's value
    `***`: by name, a declared secret flag's, and by the redactor's book. Applied where the mapping is built into
    what is shown (`bringup flags`, `status`, the flags dialog), so that a short value (`k3y-7`), which the book
    hides only as a word, is hidden by its name whatever the layout around it."""
    named = secret_names.redact_flags(flags, BOOK.declared)
    return {k: scrub(v) if isinstance(v, str) else v for k, v in named.items()}


def redact_value(name: str, value: str) -> str:
    """One flag's value as it may be shown: `***` for a secret flag's (by name or declared), else the value
    scrubbed of every secret the book knows."""
    return REDACTED if is_secret_flag(name) else scrub(value)


def redact_text(text: str) -> str:
    """A line of words (a command line joined, a flag change `~ --api-key A -> B`, a server's log line naming
    `api_key='...'`) with every secret's value `***`."""
    return scrub(secret_names.redact_text(text))
