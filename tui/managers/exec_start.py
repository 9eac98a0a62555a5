"""A systemd unit's `ExecStart=`: the command lines in effect as `systemctl cat` shows its files, where the unit's
variables come from, and the rewrite that runs a new argv while keeping every word bringup does not change exactly as
written (the grammar, read and quoted: exec_line.py). A word bringup cannot know the value of (a variable, a
specifier) is never rewritten: the refusal names where it is set.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tui.managers.exec_line import (
    SPECIFIERS,
    Assignment,
    ExecLine,
    ExecLineError,
    Word,
    assignments,
    quote,
    read,
    words,
)


@dataclass(frozen=True, slots=True)
class Origins:
    """Where a unit's variables come from, for the refusal that names them: `Environment=` assignments by name
    (to the file that sets them) and the `EnvironmentFile=`s."""

    env: Mapping[str, str] = field(default_factory=dict)  # NAME -> "Environment=NAME=... in FILE"
    env_files: tuple[str, ...] = ()

    @classmethod
    def of(cls, assigned: Sequence[Assignment]) -> Origins:
        env: dict[str, str] = {}
        files: list[str] = []
        for a in assigned:
            if a.section != "Service":
                continue
            if a.key == "Environment":
                if not a.value:
                    env.clear()
                    continue
                try:
                    items = [t for _, t in words(a.value)]
                except ExecLineError:
                    items = a.value.split()
                for item in items:
                    name, eq, val = item.partition("=")
                    if eq:
                        env[name] = f"set by Environment={name}={val}" + (f" in {a.source}" if a.source else "")
            elif a.key == "EnvironmentFile":
                if not a.value:
                    files.clear()
                else:
                    files.append(a.value)
        return cls(env, tuple(files))

    def variable(self, var: str) -> str:
        name = var[2:-1] if var.startswith("${") else var[1:]
        if name in self.env:
            return self.env[name]
        if self.env_files:
            return f"set by EnvironmentFile={', '.join(self.env_files)}"
        return ("a variable the unit sets in no Environment= or EnvironmentFile= (one of systemd's own, such as "
                "$USER, or empty)")


def _untouchable(ws: Sequence[Word], k: int, origins: Origins) -> str:
    """Why bringup does not rewrite word k: where its variables or specifiers come from, and where to change it."""
    w = ws[k]
    flag = _flag_of(ws, k)
    what = f"the value of {flag} is {w.raw}" if flag else f"the word {w.raw} would change"
    if w.variables:
        where = "; ".join((f"{v} " if len(w.variables) > 1 else "") + origins.variable(v) for v in w.variables)
        return f"{what}, {where}: change it there"
    specs = ", ".join(f"{sp} {SPECIFIERS.get(sp[1:], 'a specifier')}" for sp in w.specifiers)
    return (f"{what}, filled in by systemd ({specs}): bringup does not rewrite specifiers; change the unit "
            "itself")


def _flag_of(ws: Sequence[Word], k: int) -> str:
    v = ws[k].value
    if v.startswith("-") and "=" in v:
        return v.split("=", 1)[0]
    if k >= 1 and ws[k - 1].value.startswith("-") and not ws[k - 1].opaque:
        return ws[k - 1].value
    return ""


def rewrite(line: ExecLine, argv: Sequence[str], origins: Origins | None = None) -> str:
    """The command line (prefixes included) that runs `argv`: every word of `line` whose value stays is written as
    it is written there, bringup's new words are quoted. Raises ExecLineError when that would remove or change a
    word bringup cannot know the value of (a variable, a specifier), or the program."""
    origins = origins or Origins()
    old = line.argv
    new = list(argv)
    if not new:
        raise ExecLineError("an empty command line")
    out: list[str] = []
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            out += [w.raw for w in line.words[i1:i2]]
            continue
        for k in range(i1, i2):
            w = line.words[k]
            if k == 0:
                raise ExecLineError(f"the program {w.raw} would change to {new[0]!r}: bringup changes flags, "
                                    "not the program")
            if w.opaque:
                raise ExecLineError(_untouchable(line.words, k, origins))
        out += [quote(a, no_env=line.no_env) for a in new[j1:j2]]
    if not ops or ops[0][0] != "equal" or ops[0][1] != 0:
        raise ExecLineError(f"the program {line.words[0].raw} would change to {new[0]!r}: bringup changes flags, "
                            "not the program")
    return " ".join(out)


@dataclass(frozen=True, slots=True)
class UnitExec:
    """A unit's ExecStart= as `systemctl cat` shows its files: the command lines in effect (after the last
    `ExecStart=` that empties the list), and every file that assigns ExecStart=, in systemd's order."""

    lines: tuple[ExecLine, ...]
    setters: tuple[str, ...]
    origins: Origins

    @property
    def line(self) -> ExecLine | None:
        """The one command line in effect; None when there is none or several."""
        return self.lines[0] if len(self.lines) == 1 else None


def unit_exec(cat: str, *, without: str = "") -> UnitExec:
    """The ExecStart= of `systemctl cat` output, the file `without` (a path) left out."""
    assigned = [a for a in assignments(cat) if not (without and a.source == without)]
    lines: list[ExecLine] = []
    setters: list[str] = []
    for a in assigned:
        if a.section != "Service" or a.key != "ExecStart":
            continue
        if a.source and a.source not in setters:
            setters.append(a.source)
        if not a.value:
            lines = []
            continue
        lines.append(read(a.value, a.source))
    return UnitExec(tuple(lines), tuple(setters), Origins.of(assigned))


def values(cat: str) -> list[str]:
    """The argv bringup reads from `systemctl cat`: the last command line in effect."""
    ue = unit_exec(cat)
    return ue.lines[-1].argv if ue.lines else []
