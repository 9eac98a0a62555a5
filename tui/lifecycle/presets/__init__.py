"""Presets: what one kind of server prints, serves and accepts.

A preset is data, not code paths: phase markers, fatal signatures, failure classifiers, hints, HTTP endpoints
and the flags it knows. The reducer and the flag editor are generic over it, so a new server type (or a user's
own) is a new preset, not a new branch in the engine.
"""

from __future__ import annotations

import re
import re._constants as _sre_c
import re._parser as _sre
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

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
    pattern: Alternation


@dataclass(frozen=True, slots=True)
class Classifier:
    kind: FailureKind
    pattern: Alternation


HintFn = Callable[[FailureKind, Phase, dict[str, str | None]], str]


@dataclass(frozen=True, slots=True, eq=False)  # tables of text: compared and hashed by identity
class HintTable:
    """A preset's hints, by failure kind: data to review side by side, not a chain of branches. A few kinds read
    differently while the server starts or loads (OOM then often means memory still held by the last run)."""

    by_kind: Mapping[FailureKind, str]
    default: str
    while_loading: Mapping[FailureKind, str] = field(default_factory=dict)

    def __call__(self, kind: FailureKind, phase: Phase, flags: dict[str, str | None]) -> str:
        if phase in (Phase.STARTING, Phase.LOADING) and kind in self.while_loading:
            return self.while_loading[kind]
        return self.by_kind.get(kind, self.default)


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    markers: tuple[Marker, ...]
    ready: Alternation
    fatal: Alternation
    classifiers: tuple[Classifier, ...]
    hint: HintFn
    flags: tuple[FlagSpec, ...]
    health_path: str = "/health"
    models_path: str = "/v1/models"
    throughput_line: re.Pattern[str] | None = None
    #: lines that only a server already serving requests prints: readiness evidence like the ready line
    serving: Alternation | None = None
    #: access lines of requests the server answered: readiness evidence in a replay only, where no probe can
    #: run (live, bringup's own generation probe is that evidence; SGLang's warmup request is answered before
    #: its ready line)
    answered: Alternation | None = None
    #: where a failure happened when no phase marker was seen (a log that starts mid-way): traceback frames
    phase_hints: tuple[Marker, ...] = ()
    #: lines of a clean shutdown (SIGTERM handled, uvicorn shutting down): the run is stopping, not failing
    stopping: Alternation | None = None
    #: fatal lines that are the consequence of an earlier fatal line (the parent's SIGQUIT after a child's
    #: crash): after a cause they are not part of its excerpt
    consequence: Alternation | None = None
    #: what a traceback must say for a failure in the graph-capture phase to be a CUDA graph failure (vLLM's
    #: graph-capture phase also covers torch.compile); None: the phase alone says so
    graph_evidence: Alternation | None = None
    #: flags whose value is each node's own in a deployment over several nodes: kept per node when the
    #: deployment's flags are edited (tui/lifecycle/nodes.py)
    node_flags: tuple[str, ...] = ()

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
        if phase == Phase.GRAPH_CAPTURE and (self.graph_evidence is None or self.graph_evidence.search(text)):
            return FailureKind.CUDA_GRAPH
        if phase == Phase.WARMUP:
            return FailureKind.WARMUP
        return FailureKind.UNKNOWN


class Alternation:
    """Wordings searched like one compiled regex, screened first with plain substring tests.

    Python's `re` tries every alternative at every position of the line: 10 us for SGLang's 20 fatal wordings on a
    190-character decode line, and every line of a 20,000 lines/s burst is searched for several such lists. A match
    must contain each alternative's longest run of literal characters, so when none of those runs is in the line
    (`in`, a fraction of the cost) there is no match. Needles come from the stdlib's own regex parser; a wording
    without a literal run of 3+ characters, or case-insensitive flags, turns the screen off.
    """

    __slots__ = ("needles", "pattern", "regex")

    def __init__(self, alternatives: Sequence[str], flags: int = 0) -> None:
        self.regex = re.compile("|".join(f"(?:{a})" for a in alternatives), flags)
        self.pattern = self.regex.pattern
        self.needles = None if flags & re.IGNORECASE else _needles(_sre.parse(self.pattern))

    def search(self, text: str) -> re.Match[str] | None:
        if self.needles is not None and not any(n in text for n in self.needles):
            return None
        return self.regex.search(text)


def _needles(sub: _sre.SubPattern) -> tuple[str, ...] | None:
    """Substrings one of which any match contains, or None when that cannot be said simply."""
    items = list(sub)
    if len(items) == 1 and items[0][0] is _sre_c.BRANCH:
        out: list[str] = []
        for branch in items[0][1][1]:
            n = _needles(branch)
            if n is None:
                return None
            out += n
        return tuple(out)
    if len(items) == 1 and items[0][0] is _sre_c.SUBPATTERN:
        _group, add_flags, del_flags, inner = items[0][1]
        return _needles(inner) if not add_flags and not del_flags else None
    runs, cur = [], ""
    for op, av in items:
        if op is _sre_c.LITERAL:
            cur += chr(av)
        else:
            runs.append(cur)
            cur = ""
    longest = max([*runs, cur], key=len)
    return (longest,) if len(longest) >= 3 else None


def rx(*alternatives: str, flags: int = 0) -> Alternation:
    """One alternation; presets list their wordings one per line, easy to review against the sources."""
    return Alternation(alternatives, flags)


def get_preset(name: str) -> Preset:
    from tui.lifecycle.presets.sglang import SGLANG
    from tui.lifecycle.presets.vllm import VLLM

    presets = {"sglang": SGLANG, "vllm": VLLM}
    try:
        return presets[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r} (known: {', '.join(presets)})") from None


PRESET_NAMES = ("sglang", "vllm")
