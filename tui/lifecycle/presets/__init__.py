"""Presets: what one kind of server prints, serves and accepts.

A preset is data, not code paths: phase markers, fatal signatures, failure classifiers, hints, HTTP endpoints
and the flags it knows. The reducer and the flag editor are generic over it, so a new server type (or a user's
own) is a new preset, not a new branch in the engine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tui.model import FailureKind, Phase

# Values that may be written into a server's argv, a unit's ExecStart or a shell-quoted remote command.
# Deliberately narrow: paths, model ids, numbers, simple JSON-free tokens. Anything else is refused with a
# message, so no user text can ever smuggle a second command or option through a flag.
_SAFE_VALUE = re.compile(r"[A-Za-z0-9_./:@+=,%~-]{1,512}")  # used with fullmatch: `$` would allow a final \n


class FlagValueError(ValueError):
    """A flag value that does not fit the flag; the message is shown to the user as is."""


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One server option the console can toggle or set. `name` is the option without its leading dashes."""

    name: str
    kind: str  # bool | int | float | str | choice
    help: str = ""
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    key: str = ""  # key that toggles/edits it in the flags panel
    #: single-dash spellings the server also accepts (vLLM: `-tp`)
    short: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None

    @property
    def option(self) -> str:
        return "--" + self.name

    def all_options(self) -> tuple[str, ...]:
        return (self.option, *("--" + a for a in self.aliases), *("-" + s for s in self.short))

    def validate(self, value: str | None) -> str | None:
        """Return the canonical value (None for a bool flag that is on), or raise FlagValueError."""
        if self.kind == "bool":
            if value is None or value.lower() in ("true", "1", "yes", "on"):
                return None
            raise FlagValueError(f"--{self.name} is a switch: use `--set {self.name}` or `--unset {self.name}`"
                                 f" (or ={'true|false'}), not {value!r}")
        if value is None or value == "":
            raise FlagValueError(f"--{self.name} needs a value: --set {self.name}=VALUE")
        if self.kind == "int":
            try:
                n = int(value, 10)
            except ValueError:
                raise FlagValueError(f"--{self.name} takes an integer, not {value!r}") from None
            self._check_range(n)
            return str(n)
        if self.kind == "float":
            try:
                x = float(value)
            except ValueError:
                raise FlagValueError(f"--{self.name} takes a number, not {value!r}") from None
            if x != x or x in (float("inf"), float("-inf")):
                raise FlagValueError(f"--{self.name} takes a finite number, not {value!r}")
            self._check_range(x)
            return value.strip()
        if self.kind == "choice":
            for c in self.choices:
                if value.lower() == c.lower():
                    return c
            raise FlagValueError(f"--{self.name} must be one of {', '.join(self.choices)}; got {value!r}")
        if not _SAFE_VALUE.fullmatch(value):
            raise FlagValueError(
                f"--{self.name}: value {value!r} has characters bringup does not write into a command line "
                "(allowed: letters, digits and _ . / : @ + = , % ~ -)")
        if value.startswith("-"):
            raise FlagValueError(f"--{self.name}: a value may not start with '-' ({value!r})")
        return value

    def _check_range(self, x: float) -> None:
        if self.minimum is not None and x < self.minimum:
            raise FlagValueError(f"--{self.name} must be >= {self.minimum:g}; got {x:g}")
        if self.maximum is not None and x > self.maximum:
            raise FlagValueError(f"--{self.name} must be <= {self.maximum:g}; got {x:g}")


@dataclass(frozen=True, slots=True)
class Marker:
    phase: Phase
    pattern: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class Classifier:
    kind: FailureKind
    pattern: re.Pattern[str]


HintFn = Callable[[FailureKind, Phase, dict[str, str | None]], str]


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    markers: tuple[Marker, ...]
    ready: re.Pattern[str]
    fatal: re.Pattern[str]
    classifiers: tuple[Classifier, ...]
    hint: HintFn
    flags: tuple[FlagSpec, ...]
    health_path: str = "/health"
    models_path: str = "/v1/models"
    throughput_line: re.Pattern[str] | None = None
    #: lines that only a server already serving requests prints: readiness evidence like the ready line
    serving: re.Pattern[str] | None = None
    #: where a failure happened when no phase marker was seen (a log that starts mid-way): traceback frames
    phase_hints: tuple[Marker, ...] = ()

    def flag(self, name: str) -> FlagSpec | None:
        name = name.lstrip("-")
        for f in self.flags:
            if name == f.name or name in f.aliases:
                return f
        return None

    def infer_phase(self, text: str, phase: Phase) -> Phase:
        """The phase a failure belongs to: the one reached, or, if no marker was seen, the traceback's."""
        if phase != Phase.STARTING:
            return phase
        for m in self.phase_hints:
            if m.pattern.search(text):
                return m.phase
        return phase

    def classify(self, text: str, phase: Phase) -> FailureKind:
        for c in self.classifiers:
            if c.pattern.search(text):
                return c.kind
        if phase == Phase.GRAPH_CAPTURE:
            return FailureKind.CUDA_GRAPH
        if phase == Phase.WARMUP:
            return FailureKind.WARMUP
        return FailureKind.UNKNOWN


def rx(*alternatives: str, flags: int = 0) -> re.Pattern[str]:
    """One compiled alternation; presets list their wordings one per line, easy to review against the sources."""
    return re.compile("|".join(f"(?:{a})" for a in alternatives), flags)


def get_preset(name: str) -> Preset:
    from tui.lifecycle.presets.sglang import SGLANG
    from tui.lifecycle.presets.vllm import VLLM

    presets = {"sglang": SGLANG, "vllm": VLLM}
    try:
        return presets[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r} (known: {', '.join(presets)})") from None


PRESET_NAMES = ("sglang", "vllm")
