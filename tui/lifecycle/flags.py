"""Reading and editing a server's command-line flags as an argv list (never as a string).

Flags are named as the server's option without dashes (`disable-cuda-graph`, `speculative-algorithm`). Every
value is validated against the preset's FlagSpec before anything is written; the result is a new argv, so the
caller can show the exact change, write it, and keep the old one for rollback.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from tui.lifecycle.presets import FlagSpec, FlagValueError


@dataclass(frozen=True, slots=True)
class FlagChange:
    name: str
    value: str | None  # None: switch on (bool) ; for unset see `remove`
    remove: bool = False

    def describe(self) -> str:
        if self.remove:
            return f"--{self.name} removed"
        return f"--{self.name}" + ("" if self.value is None else f" {self.value}")


def find_spec(name: str, specs: Sequence[FlagSpec]) -> FlagSpec:
    name = name.strip().lstrip("-")
    for f in specs:
        if name == f.name or name in f.aliases:
            return f
    raise FlagValueError(unknown_flag(name, [n for f in specs for n in (f.name, *f.aliases)]))


#: what `--set` / `--unset` take, for an item that names no flag (`--set ''`, `--set =4`, `--set '==='`)
SET_USAGE = "--set needs NAME or NAME=VALUE (and --unset needs NAME)"


def unknown_flag(name: str, known: Sequence[str], listing: str = "bringup flags") -> str:
    """One wording for a flag the preset does not know (restart, the console, a sweep's plan): the known flag it
    is close to when it is a typo, else how to declare one (the kind says whether it takes a value). No name at
    all is no unknown flag: what `--set` takes is said instead."""
    if not name.strip().lstrip("-"):
        return f"{SET_USAGE}; no flag named in {name!r}" if name.strip() else SET_USAGE
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if close:
        return f"unknown flag {name!r} (did you mean {close[0]!r}?); `{listing}` lists the flags this preset knows"
    return (f"unknown flag {name!r}; `{listing}` lists the flags this preset knows, and the deployment's "
            f"extra_flags declares others (e.g. {{ name = \"{name}\", kind = \"bool\" }}, or kind int, float, str "
            "or choice for one that takes a value)")


def _option_at(argv: Sequence[str], i: int, spec: FlagSpec) -> tuple[bool, int, str | None]:
    """Does argv[i] set `spec`? Returns (match, number of argv items it spans, value)."""
    a = argv[i]
    for opt in spec.all_options():
        if a == opt:
            if spec.kind == "bool":
                return True, 1, None
            value = argv[i + 1] if i + 1 < len(argv) else None
            return True, 2 if value is not None else 1, value
        if a.startswith(opt + "="):
            return True, 1, a[len(opt) + 1:]
    return False, 0, None


def current_values(argv: Sequence[str], specs: Sequence[FlagSpec]) -> dict[str, str | None]:
    """Flags present in argv: name -> value (None for a switch). Unknown options are ignored."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        for spec in specs:
            match, span, value = _option_at(argv, i, spec)
            if match:
                out[spec.name] = value
                i += span
                break
        else:
            i += 1
    return out


def remove_flag(argv: Sequence[str], spec: FlagSpec) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(argv):
        match, span, _ = _option_at(argv, i, spec)
        if match:
            i += span
            continue
        out.append(argv[i])
        i += 1
    return out


def parse_changes(sets: Sequence[str], unsets: Sequence[str], specs: Sequence[FlagSpec]) -> list[FlagChange]:
    """`--set NAME[=VALUE]` and `--unset NAME` from the CLI, validated. Raises FlagValueError."""
    changes = []
    for item in sets:
        name, eq, value = item.partition("=")
        if not name.strip().lstrip("-"):
            raise FlagValueError(f"--set needs NAME or NAME=VALUE, not {item!r}")
        spec = find_spec(name, specs)
        if spec.kind == "bool" and eq and value.lower() in ("false", "0", "no", "off"):
            changes.append(FlagChange(spec.name, None, remove=True))
            continue
        changes.append(FlagChange(spec.name, spec.validate(value if eq else None)))
    for name in unsets:
        if not name.strip().lstrip("-"):
            raise FlagValueError(f"--unset needs NAME, not {name!r}")
        spec = find_spec(name, specs)
        changes.append(FlagChange(spec.name, None, remove=True))
    return changes


def apply_changes(argv: Sequence[str], changes: Sequence[FlagChange], specs: Sequence[FlagSpec]) -> list[str]:
    """A new argv with the changes applied; removing a flag that is not set is a no-op."""
    out = list(argv)
    for ch in changes:
        spec = find_spec(ch.name, specs)
        out = remove_flag(out, spec)
        if ch.remove:
            continue
        out.append(spec.option)
        if spec.kind != "bool":
            if ch.value is None:
                raise FlagValueError(f"--{spec.name} needs a value")
            out.append(ch.value)
    return out


def diff(old: Sequence[str], new: Sequence[str], specs: Sequence[FlagSpec]) -> list[str]:
    """Human-readable flag changes between two argvs, e.g. ['+ --disable-cuda-graph', '- --enable-metrics']."""
    a, b = current_values(old, specs), current_values(new, specs)
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in b:
            out.append(f"- --{name}" + ("" if a[name] is None else f" {a[name]}"))
        elif name not in a:
            out.append(f"+ --{name}" + ("" if b[name] is None else f" {b[name]}"))
        elif a[name] != b[name]:
            out.append(f"~ --{name} {a[name]} -> {b[name]}")
    if not out and list(old) != list(new):
        out.append("~ other arguments changed")
    return out


def describe_command(command: Sequence[str]) -> str:
    """The program, and for `python -m module` the module: "python3" alone says nothing of what runs."""
    if not command:
        return "?"
    name = PurePath(command[0]).name
    if name.startswith("python") and "-m" in command[1:4]:
        i = command.index("-m", 1)
        if i + 1 < len(command):
            return f"{name} -m {command[i + 1]}"
    return name
