"""A deployment's flags as `tui.ops.change` reads them, without an engine: for the plan's unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tui.lifecycle.presets import FlagSpec


@dataclass
class SavedArgv:
    saved: dict[str, list[str]] = field(default_factory=dict)

    async def read_saved_argv(self, which: str) -> list[str] | None:
        return self.saved.get(which)


@dataclass
class Flags:
    """A deployment named `name` whose flags are `now`, read with `every`; `--set` offered `offered` (default:
    `every`), of the release `release`."""

    name: str
    now: list[str]
    every: Sequence[FlagSpec]
    offered: Sequence[FlagSpec] | None = None
    release: str = "SGLang 0.5.23"
    manager: SavedArgv = field(default_factory=SavedArgv)
    reads: int = 0
    #: the config's command line (None: the manager keeps none apart from the flags)
    configured: list[str] | None = None

    @property
    def configured_command(self) -> list[str] | None:
        return self.configured

    @property
    def flag_specs(self) -> Sequence[FlagSpec]:
        return self.every

    @property
    def offered_flags(self) -> Sequence[FlagSpec]:
        return self.every if self.offered is None else self.offered

    def release_words(self) -> str:
        return self.release

    async def argv(self) -> list[str]:
        self.reads += 1
        return list(self.now)
