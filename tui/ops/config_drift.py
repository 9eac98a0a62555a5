"""The config's command against the flags bringup saved: what the operator said last is what runs.

A manager that keeps flags apart from the config (`process`, `docker`: the argv written by `restart --set`) used to
run the saved argv whatever the config said since: an operator who edited `command` in config.toml and started
again waited a whole bring-up for the old server (issue 51). So each flag write records the config's command it
was made over (`save_argv("config", ...)`), and before acting the config's command now is compared with it:

- the same (or no saved flags): the saved flags are the operator's later word, and run;
- edited since: the config's command runs, with the flag changes made since (base -> saved) replayed on it where
  they still apply; a change to a flag the edit changed too, or to arguments no flag covers, is the config's
  (said last), and each one dropped is named;
- flags saved before bringup recorded the config they came from: which came last cannot be told, so the saved
  flags run as before, and the difference is said.

Pure but for `config_drift`, which reads the saved records through the manager.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from tui.lifecycle.flags import FlagChange, apply_changes, current_values, remove_flag
from tui.lifecycle.presets import FlagSpec, FlagValueError
from tui.lifecycle.secrets import redact_argv, redact_text

#: the `which` of the saved record: the config's command the saved flags were written over
BASE = "config"

_ABSENT = object()


class SavedRecords(Protocol):
    async def read_saved_argv(self, which: str) -> list[str] | None: ...


@dataclass(frozen=True, slots=True)
class Drift:
    """The config's command and the saved flags disagree: what runs instead of the saved flags (`run`), and why,
    in words said before acting."""

    config: tuple[str, ...]
    saved: tuple[str, ...]
    #: the command line to run: the config's with the changes since replayed (or the saved one, undated)
    run: tuple[str, ...]
    #: one line each, but the `runs:` line: what was seen and what is done about it
    said: tuple[str, ...]
    #: the lines after `runs:` (what was dropped), "" for none
    after: tuple[str, ...] = ()
    #: the command line that will run after the caller's own change (a restart's `--unset`), when it has one:
    #: `runs:` names it, never the reconciled one it changes (issue 51: `runs: ... --disable-cuda-graph`, then
    #: `- --disable-cuda-graph`)
    then: tuple[str, ...] | None = None

    def running(self, argv: Sequence[str]) -> Drift:
        """The drift as said before running `argv`: the reconciled command with the caller's change made on it."""
        return replace(self, then=tuple(argv))

    @property
    def lines(self) -> tuple[str, ...]:
        runs = self.run if self.then is None else self.then
        also = " (with this command's change)" if self.then is not None and self.then != self.run else ""
        return (*self.said, f"runs:   {_words(runs)}{also}", *self.after)

    @property
    def message(self) -> str:
        return "; ".join(self.lines)


def _words(argv: Sequence[str]) -> str:
    return shlex.join(redact_argv(list(argv)))


def _others(argv: Sequence[str], specs: Sequence[FlagSpec]) -> list[str]:
    rest = list(argv)
    for spec in specs:
        rest = remove_flag(rest, spec)
    return rest


def _said(flag: str, value: object) -> str:
    if value is _ABSENT:
        return f"--{flag} unset"
    return redact_text(f"--{flag}" + ("" if value is None else f" {value}"))


def reconcile(config: Sequence[str], base: Sequence[str] | None, saved: Sequence[str],
              specs: Sequence[FlagSpec]) -> Drift | None:
    """What runs when the config's command is `config`, the saved flags `saved`, written over the config's command
    `base` (None: not recorded). None: no disagreement, the saved flags run."""
    if list(saved) == list(config) or (base is not None and list(base) == list(config)):
        return None
    if base is None:
        return Drift(tuple(config), tuple(saved), tuple(saved), (
            "the config's command differs from the flags bringup saved, which were written before it recorded the "
            "config they came from, so which is newer cannot be told: the saved flags run",
            f"config: {_words(config)}", f"saved:  {_words(saved)}"))
    was, now, cfg = (current_values(a, specs) for a in (base, saved, config))
    changes: list[FlagChange] = []
    dropped: list[str] = []
    for flag in dict.fromkeys([*was, *now]):
        before, after = was.get(flag, _ABSENT), now.get(flag, _ABSENT)
        if before == after:
            continue
        if cfg.get(flag, _ABSENT) != before:  # the edit changed this flag too: the config said it last
            dropped.append(f"{_said(flag, after)} (the config now has {_said(flag, cfg.get(flag, _ABSENT))})")
            continue
        changes.append(FlagChange(flag, None, remove=True) if after is _ABSENT else FlagChange(flag, now[flag]))
    if _others(base, specs) != _others(saved, specs):
        dropped.append("the saved command's other arguments (the config's are taken)")
    try:
        run = apply_changes(config, changes, specs)
    except FlagValueError as e:
        dropped.append(f"every saved flag change ({e})")
        changes, run = [], list(config)
    said = ("the config's command was edited after the flags were last changed: it runs, with the flag changes "
            "made since replayed on it" + ("" if changes else " (none still apply)"),
            f"config: {_words(config)}", f"saved:  {_words(saved)}")
    after = ("dropped, the config's edit said otherwise: " + "; ".join(dropped),) if dropped else ()
    return Drift(tuple(config), tuple(saved), tuple(run), said, after)


async def config_drift(config: Sequence[str] | None, saved: Sequence[str], manager: SavedRecords,
                       specs: Sequence[FlagSpec]) -> Drift | None:
    """`reconcile` with the base read from the manager's records; None for a manager whose config has no command."""
    if config is None or list(saved) == list(config):
        return None
    return reconcile(config, await manager.read_saved_argv(BASE), saved, specs)
