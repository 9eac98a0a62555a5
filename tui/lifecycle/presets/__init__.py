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
from typing import TYPE_CHECKING

from tui.lifecycle.presets.telemetry import LogThroughput, MemoryBudget, MetricsHint, MetricsSpec
from tui.model import FailureKind, Phase

if TYPE_CHECKING:
    from tui.lifecycle.presets.facts import ReleaseFacts

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
    #: a flag that took over another's job in later releases (SGLang's `cuda-graph-backend-decode` for
    #: `disable-cuda-graph`): on a release that lacks or deprecates that one, its key moves here
    takes_key_from: str = ""
    #: for a flag with a value: the value its key toggles on (unset again on the next press)
    toggle_value: str | None = None
    #: flags the key sets together with this one, to the same value (graphs off is decode AND prefill)
    companions: tuple[str, ...] = ()

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
            self._check_range(n, value)
            return str(n)
        if self.kind == "float":
            try:
                x = float(value)
            except ValueError:
                raise FlagValueError(f"--{self.name} takes a number, not {value!r}") from None
            if x != x or x in (float("inf"), float("-inf")):
                raise FlagValueError(f"--{self.name} takes a finite number, not {value!r}")
            self._check_range(x, value)
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

    def _check_range(self, x: float, given: str) -> None:
        """Out of range says the value as it was given: `{x:g}` turned 99999999999999999999 into 1e+20."""
        if self.minimum is not None and x < self.minimum:
            raise FlagValueError(f"--{self.name} must be >= {self.minimum:g}; got {given.strip()}")
        if self.maximum is not None and x > self.maximum:
            raise FlagValueError(f"--{self.name} must be <= {self.maximum:g}; got {given.strip()}")


@dataclass(frozen=True, slots=True)
class Releases:
    """The releases that log a wording: from `first` (inclusive) until `gone` (the first release without it); ""
    leaves that end open. Bounds are releases whose wheels were read (a comment says which)."""

    first: str = ""
    gone: str = ""

    def covers(self, version: str) -> bool:
        from tui.lifecycle.presets.facts import version_key

        key = version_key(version)
        return (not self.first or key >= version_key(self.first)) and (not self.gone or key < version_key(self.gone))


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
    #: traceback frames that place a failure in their phase whatever later phase the run's lines had reached, the
    #: first that matches (vLLM profiles memory after load by running the model, torch.compile included, whose lines
    #: are graph-capture's markers: a failure in `profile_run` is the loading phase's, one in `capture_model` not)
    placed_by_frames: tuple[Marker, ...] = ()
    #: the releases that log each marker wording, where not every covered one does: wording -> its `Releases`. The
    #: conformance test holds each release to exactly these (a wording a release drops, or gains, fails it until the
    #: range says so: SGLang 0.5.21's `Init parallel begin.` for `Init torch distributed begin.`)
    wording_releases: Mapping[str, Releases] = field(default_factory=dict)
    #: what a traceback must say for a failure in the graph-capture phase to be a CUDA graph failure (vLLM's
    #: graph-capture phase also covers torch.compile); None: the phase alone says so
    graph_evidence: Alternation | None = None
    #: flags whose value is each node's own in a deployment over several nodes: kept per node when the
    #: deployment's flags are edited (tui/lifecycle/nodes.py)
    node_flags: tuple[str, ...] = ()
    # What the server says about its own work (tui/lifecycle/presets/telemetry.py); the engine, the collectors and
    # the front ends read a server's knowledge here, never by its name. ARCHITECTURE.md, "Where to add things".
    #: the name people know the server by, in messages ("SGLang")
    display_name: str = ""
    #: which series of its /metrics page are which figure, and how its ranks' series add up
    metrics: MetricsSpec | None = None
    #: the reader of its periodic throughput log line (the figures when it serves no /metrics)
    log_throughput: LogThroughput | None = None
    #: the flag that sizes its GPU memory, and its default: the GPU panel judges memory against it
    memory_budget: MemoryBudget | None = None
    #: how its /metrics figures are turned on, said when it serves none
    metrics_hint: MetricsHint | None = None
    #: lines only this server writes: a replay counts each preset's hits to tell which server wrote a log
    detection: re.Pattern[str] | None = None
    #: start-up lines that state the server's release: each wording ends where the release begins (read right
    #: after the match, tui/lifecycle/server_version.py: `re` allows no group name twice in one pattern, and one
    #: wording per alternative keeps the substring screen). None: its log never says
    version_line: Alternation | None = None
    #: where its HTTP server names its release, in the order tried (the next only after a 404: a route the release
    #: lacks), once a run has said it is ready; and the key of the JSON answer that holds it
    version_paths: tuple[str, ...] = ()
    version_key: str = "version"
    #: wordings of the lists above that are another program's (PyTorch, NCCL, uvicorn, argparse, the C++ runtime),
    #: so no release of the server has them in its own code: the conformance tests check every other one against
    #: the releases' format strings (tests/unit/test_conformance.py), and these against not being the server's own
    foreign_wordings: frozenset[str] = frozenset()
    #: wordings that match a value the release prints through a template (vLLM 0.8's `args: %s` printing a
    #: `Namespace(...)`): wording -> that template, which the conformance tests find in a release's format strings
    value_wordings: Mapping[str, str] = field(default_factory=dict)
    #: the hints as one release words them (its flags): `for_release` puts them in place of `hint`
    hints_for: Callable[[ReleaseFacts, bool], HintFn] | None = None
    #: the release this preset was specialised for by `for_release` ("": every release's flags, newest hints)
    release: str = ""

    def for_release(self, facts: ReleaseFacts | None, known: bool = True) -> Preset:
        """This preset as one release sees it: its parser's flags and choices, hints naming only those flags
        (`known=False`: the newest facts stand in for a release not said yet; tui/lifecycle/presets/per_release.py)."""
        from tui.lifecycle.presets.per_release import for_release

        return for_release(self, facts, known)

    def for_version(self, version: str | None) -> Preset:
        """This preset for a run of that release (None: not said yet)."""
        from tui.lifecycle.presets.per_release import release_preset

        return release_preset(self, version)

    def infer_phase(self, text: str, phase: Phase) -> Phase:
        """The phase a failure belongs to: the one reached, or, if no marker was seen, the traceback's; frames that
        place a failure (`placed_by_frames`) override a loading or graph-capture phase reached by the lines."""
        if phase in (Phase.LOADING, Phase.GRAPH_CAPTURE):
            for m in self.placed_by_frames:
                if m.pattern.search(text):
                    return m.phase
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

    __slots__ = ("_compiled", "alternatives", "flags", "pattern")

    def __init__(self, alternatives: Sequence[str], flags: int = 0) -> None:
        #: each wording as written: the conformance tests hold each one to a release's own format strings
        self.alternatives = tuple(alternatives)
        self.pattern = "|".join(f"(?:{a})" for a in alternatives)
        self.flags = flags
        # compiled at the first search, not at import: the presets hold about 180 wordings, parsed twice each (the
        # regex, the needles) in 40 ms, and every `bringup` command paid that at start-up for the one preset (or
        # none) its deployment uses
        self._compiled: tuple[re.Pattern[str], tuple[str, ...] | None] | None = None

    def _compile(self) -> tuple[re.Pattern[str], tuple[str, ...] | None]:
        if self._compiled is None:
            regex = re.compile(self.pattern, self.flags)
            self._compiled = regex, None if self.flags & re.IGNORECASE else _needles(_sre.parse(self.pattern))
        return self._compiled

    @property
    def regex(self) -> re.Pattern[str]:
        return self._compile()[0]

    def search(self, text: str) -> re.Match[str] | None:
        regex, needles = self._compiled or self._compile()
        if needles is None:
            return regex.search(text)
        for n in needles:  # a loop, not any() over a generator: a third of the screen's cost on a quiet line
            if n in text:
                return regex.search(text)
        return None


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
    """The registered preset of that name (tui/lifecycle/presets/registry.py); KeyError names the known ones."""
    from tui.lifecycle.presets.registry import get_preset as get

    return get(name)


def preset_names() -> tuple[str, ...]:
    """The registered presets' names, in the registry's order."""
    from tui.lifecycle.presets.registry import preset_names as names

    return names()
