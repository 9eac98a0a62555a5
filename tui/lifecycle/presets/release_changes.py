"""What changed between consecutive releases of a server, as far as its preset relies on it, and the preset's
declared treatment of each change.

Checking each release's facts on their own misses a rename: a release identical to SGLang 0.5.23 but with
`--cuda-graph-backend-{decode,prefill}` renamed passes every per-release check (older releases still have the old
names, the preset offers per release only what the release takes), and bringup silently falls back to the
deprecated `--disable-cuda-graph`, never learning the new name. So every difference between a release and the one
before, in what the preset relies on (the flags it edits and their choices, the metrics its telemetry reads, the
wordings it matches, the program argparse refuses a command line with), must be declared with how the preset
treats it (`ReleaseChange`), and tests/unit/test_release_changes.py fails on any difference not declared (and on
any declaration no difference backs). A flag gone or deprecated beside a new flag of like name is reported with
that flag as a rename candidate, so a rename's new name is always in front of whoever declares it.

Pure: the facts are package data (facts.py); this module reads nothing else.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tui.lifecycle.presets.facts import ReleaseFacts, log_formats

__all__ = ["Change", "ChangeKind", "ReleaseChange", "Treatment", "differences", "release_text", "undeclared",
           "watched_wordings"]


class ChangeKind(enum.Enum):
    FLAG_GONE = "flag gone"
    FLAG_ADDED = "flag added"
    FLAG_DEPRECATED = "flag deprecated"
    FLAG_UNDEPRECATED = "flag no longer deprecated"
    #: a flag new in a release where a watched flag of like name went or was deprecated: a rename candidate
    FLAG_LIKE_ADDED = "flag of like name added"
    CHOICE_GONE = "choice gone"
    CHOICE_ADDED = "choice added"
    CHOICES_FREED = "choices now free text"
    CHOICES_FIXED = "choices now a fixed list"
    METRIC_GONE = "metric gone"
    METRIC_ADDED = "metric added"
    #: a wording the preset matches that the release before logged and this one does not (a new wording needs no
    #: declaration: matching more than a release says costs nothing; markers are held per release exactly by
    #: `Preset.wording_releases` instead)
    WORDING_GONE = "wording gone"
    PROG_CHANGED = "refusal program changed"


class Treatment(enum.Enum):
    """How the preset treats a change (the words a reader checks the code against)."""

    #: offered, validated and named in hints only on releases whose parser takes it (per_release._offered)
    OFFERED_WHERE_TAKEN = "offered only where the release takes it"
    #: a flag bringup does not edit but its hints name: named only on releases whose parser takes it (hints_for
    #: reads the release's facts; test_conformance checks every hint of every release)
    HINTED_WHERE_TAKEN = "named in hints only where the release takes it"
    #: the key moves to the successor (FlagSpec.takes_key_from), hints name the successor
    KEY_MOVES = "key and hints move to the successor"
    #: the choices offered are the release's own (per_release._offered)
    CHOICES_FROM_RELEASE = "choices are the release's own"
    #: the telemetry reads the successor where the release exports it
    METRIC_SUCCESSOR = "the successor is read"
    #: read where the release exports it; on releases without it the figure is shown as unknown
    READ_WHERE_EXPORTED = "read where the release exports it"
    #: a metric no reading depends on alone (another family gives the figure on that release)
    METRIC_NOT_NEEDED = "no figure depends on it"
    #: the preset keeps the wording for the releases that log it; `successor`, if any, is the new wording it matches
    WORDING_KEPT = "kept for the releases that log it"
    #: the refusal rule takes any program name (common.BAD_ARGS), checked on each release's refusal lines
    ANY_PROG = "the refusal rule takes any program"
    #: not relied on: the preset does nothing with it (the declaration's `why` says why that is right)
    NOT_RELIED_ON = "not relied on"


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between a release and the one before it."""

    release: str  # the first release with the change
    kind: ChangeKind
    subject: str  # `--flag`, `--flag=choice`, a metric family, a wording (the preset's regex), `prog`
    detail: str = ""  # what it was and became, for the reader

    @property
    def key(self) -> tuple[str, ChangeKind, str]:
        return (self.release, self.kind, self.subject)

    def __str__(self) -> str:
        return f"{self.release}: {self.kind.value}: {self.subject}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True, slots=True)
class ReleaseChange:
    """A preset's declaration of one change: which, how it is treated, and what took over."""

    release: str
    kind: ChangeKind
    subject: str
    treatment: Treatment
    successor: str = ""
    why: str = ""

    @property
    def key(self) -> tuple[str, ChangeKind, str]:
        return (self.release, self.kind, self.subject)


_WORD = re.compile(r"[a-z0-9]+")
#: words too common among flags to make two flags alike
_COMMON_WORDS = frozenset({"enable", "disable", "no", "max", "min", "size", "num", "use", "mode", "path", "type"})


def _words(flag: str) -> frozenset[str]:
    return frozenset(_WORD.findall(flag.lower())) - _COMMON_WORDS


def _alike(a: str, b: str) -> bool:
    """Flags that may be one renamed: at least two significant words in common (`cuda graph backend decode` and
    `cuda graph mode decode`), or all of the shorter one's."""
    wa, wb = _words(a), _words(b)
    common = wa & wb
    return len(common) >= 2 or (bool(common) and common in (wa, wb))


def _long_spellings(facts: ReleaseFacts) -> set[str]:
    return {s for o in facts.options for s in o.flags if s.startswith("--")}


def _flag_changes(watched: Sequence[str], with_choices: frozenset[str], prev: ReleaseFacts, new: ReleaseFacts
                  ) -> list[Change]:
    out: list[Change] = []
    v = new.version
    gone_or_deprecated: list[str] = []
    for flag in watched:
        a, b = prev.option(flag), new.option(flag)
        if a is not None and b is None:
            out.append(Change(v, ChangeKind.FLAG_GONE, flag))
            gone_or_deprecated.append(flag)
        elif a is None and b is not None:
            out.append(Change(v, ChangeKind.FLAG_ADDED, flag))
        elif a is not None and b is not None:
            if b.deprecated and not a.deprecated:
                out.append(Change(v, ChangeKind.FLAG_DEPRECATED, flag, b.deprecated_note[:120]))
                gone_or_deprecated.append(flag)
            elif a.deprecated and not b.deprecated:
                out.append(Change(v, ChangeKind.FLAG_UNDEPRECATED, flag))
            if flag not in with_choices:
                continue
            if a.choices is not None and b.choices is None and a.kind == "choice":
                out.append(Change(v, ChangeKind.CHOICES_FREED, flag, f"was {', '.join(a.choices)}"))
            elif a.choices is None and b.choices is not None and b.kind == "choice":
                out.append(Change(v, ChangeKind.CHOICES_FIXED, flag, ", ".join(b.choices)))
            elif a.choices is not None and b.choices is not None:
                out += [Change(v, ChangeKind.CHOICE_GONE, f"{flag}={c}") for c in a.choices if c not in b.choices]
                out += [Change(v, ChangeKind.CHOICE_ADDED, f"{flag}={c}") for c in b.choices if c not in a.choices]
    if gone_or_deprecated:
        new_flags = sorted(_long_spellings(new) - _long_spellings(prev) - set(watched))
        for flag in new_flags:
            like = [g for g in gone_or_deprecated if _alike(g, flag)]
            if like:
                out.append(Change(v, ChangeKind.FLAG_LIKE_ADDED, flag, "beside " + ", ".join(like)))
    return out


def _metric_changes(watched: Sequence[str], prev: ReleaseFacts, new: ReleaseFacts) -> list[Change]:
    out = []
    for family in watched:
        a, b = prev.has_metric(family), new.has_metric(family)
        if a is not None and b is None:
            out.append(Change(new.version, ChangeKind.METRIC_GONE, family))
        elif a is None and b is not None:
            out.append(Change(new.version, ChangeKind.METRIC_ADDED, family))
    return out


def release_text(facts: ReleaseFacts) -> str:
    """Every message the release can log, rendered twice (fields as "1", and text fields empty), one a line: the
    text a wording is searched in (MULTILINE)."""
    lines = []
    for f in log_formats(facts.server, facts.version):
        for sample in ("1", ""):
            text = f.render(sample)
            if text is not None:
                lines.append(text)
    return "\n".join(lines)


def watched_wordings(alternatives: Iterable[tuple[str, int]], texts: Sequence[tuple[ReleaseFacts, str]]
                     ) -> dict[str, tuple[bool, ...]]:
    """For each wording (regex, its flags), whether each release's text has it, in the releases' order."""
    out: dict[str, tuple[bool, ...]] = {}
    for alt, flags in alternatives:
        rx = re.compile(alt, flags | re.MULTILINE)
        out[alt] = tuple(rx.search(t) is not None for _f, t in texts)
    return out


def differences(releases: Sequence[ReleaseFacts], flags: Sequence[str], metrics: Sequence[str],
                wordings: dict[str, tuple[bool, ...]] | None = None, choices_of: Iterable[str] = ()) -> list[Change]:
    """Every change between each release and the one before (oldest first) in what is watched: `flags` (long
    spellings: gone, added, deprecated), the choices of `choices_of` (the flags whose values bringup offers),
    `metrics` (families), `wordings` (`watched_wordings` over the same releases), and the refusal program (where both
    releases' facts record it)."""
    out: list[Change] = []
    with_choices = frozenset(choices_of)
    for i in range(1, len(releases)):
        prev, new = releases[i - 1], releases[i]
        out += _flag_changes(flags, with_choices, prev, new)
        out += _metric_changes(metrics, prev, new)
        if prev.refusals and new.refusals and (prev.prog, prev.top_prog) != (new.prog, new.top_prog):
            out.append(Change(new.version, ChangeKind.PROG_CHANGED, "prog",
                              f"{prev.prog!r} (unknown flags: {prev.top_prog!r}) -> {new.prog!r} "
                              f"(unknown flags: {new.top_prog!r})"))
        for alt, seen in (wordings or {}).items():
            if seen[i - 1] and not seen[i]:
                out.append(Change(new.version, ChangeKind.WORDING_GONE, alt))
    return out


def undeclared(changes: Sequence[Change], declared: Sequence[ReleaseChange]) -> tuple[list[Change],
                                                                                      list[ReleaseChange]]:
    """The changes no declaration covers, and the declarations no change backs (stale: the facts moved on)."""
    keys = {d.key for d in declared}
    seen = {c.key for c in changes}
    return [c for c in changes if c.key not in keys], [d for d in declared if d.key not in seen]
