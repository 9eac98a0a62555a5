"""What each released SGLang and vLLM says, accepts and exports, as extracted from its wheel.

The presets' wordings, flags and metric names were once written by hand and checked against a simulator written
the same way; several were wrong on the releases people run. The facts here are the releases' own: the JSON files
next to this module are written by `python -m tools.serverfacts` (statically, from the released wheels, with each
wheel's sha256), and the conformance tests hold every preset, hint and the simulator to them. At run time they
answer "does this release take this flag" once the server's release is known.

Pure: the files are package data, each read when its release is first asked for; nothing here touches the host or
the network.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

__all__ = [
    "LogFormat", "MetricFact", "OptionFact", "ReleaseFacts", "ReleaseMatch", "known_versions", "log_formats",
    "release_facts", "releases", "resolve", "version_key",
]


@dataclass(frozen=True, slots=True)
class OptionFact:
    """One command-line option of a release: every spelling its parser takes."""

    dest: str
    flags: tuple[str, ...]
    kind: str  # bool | int | float | str | choice | json | list | unknown
    choices: tuple[str, ...] | None = None
    nargs: str | None = None
    #: a BooleanOptionalAction: `--no-NAME` is a spelling too
    negatable: bool = False
    deprecated: bool = False
    deprecated_note: str = ""
    source: str = ""

    @property
    def long(self) -> str:
        """The first long spelling (the one bringup writes)."""
        return next((f for f in self.flags if f.startswith("--")), self.flags[0])

    def spellings(self) -> tuple[str, ...]:
        neg = tuple("--no-" + f[2:] for f in self.flags if f.startswith("--")) if self.negatable else ()
        return (*self.flags, *neg)


@dataclass(frozen=True, slots=True)
class LogFormat:
    """A message the release can log: a `str.format` template with anonymous fields (`{}`, `{:.2f}`)."""

    text: str
    via: str = ""
    source: str = ""

    def render(self, sample: str = "1") -> str | None:
        """The message with every field filled with a sample value (a number where the spec wants one), or None
        when the template cannot be rendered (an odd spec the extractor kept as written)."""
        values: list[object] = []
        for _literal, name, spec, _conv in _FORMATTER.parse(self.text):
            if name is None:
                continue
            kind = (spec or "")[-1:]
            values.append(1 if kind in ("d", "x", "o", "b", "n") else 1.0 if kind in ("f", "e", "g", "%", "F", "E")
                          else sample)
        try:
            return self.text.format(*values)
        except (ValueError, IndexError, KeyError):
            return None

    def regex(self) -> re.Pattern[str]:
        """The template as a regex over a logged message: each field any text, the rest literal."""
        out: list[str] = []
        for literal, name, _spec, _conv in _FORMATTER.parse(self.text):
            out.append(re.escape(literal))
            if name is not None:
                out.append(r".*?")
        return re.compile("".join(out))


@dataclass(frozen=True, slots=True)
class MetricFact:
    """One Prometheus metric a release defines. `name` as declared (prometheus_client adds `_total` to a counter
    that lacks it); `updated_in`: the methods that increment or set it, which say on what clock it moves."""

    name: str
    type: str
    labels: tuple[str, ...] = ()
    #: labels a collector adds only under a condition (SGLang's `dp_rank` under a DP controller, `priority`)
    optional_labels: tuple[str, ...] = ()
    labels_resolved: bool = True
    collector: str = ""
    updated_in: tuple[str, ...] = ()
    source: str = ""

    @property
    def exposed(self) -> str:
        """The family name on a /metrics page."""
        return self.name[:-6] if self.type == "counter" and self.name.endswith("_total") else self.name

    def samples(self) -> tuple[str, ...]:
        """The sample names a scrape shows for it."""
        base = self.exposed
        if self.type == "counter":
            return (base + "_total", base + "_created")
        if self.type == "histogram":
            return (base + "_bucket", base + "_sum", base + "_count", base + "_created")
        if self.type == "summary":
            return (base, base + "_sum", base + "_count", base + "_created")
        return (base,)


@dataclass(frozen=True, slots=True)
class ReleaseFacts:
    server: str
    version: str
    wheel_file: str
    wheel_sha256: str
    allow_abbrev: bool
    underscore_spellings: bool
    options: tuple[OptionFact, ...]
    positionals: tuple[str, ...]
    metrics: tuple[MetricFact, ...]
    args_line_form: str  # dict | dataclass | non_default_dict | namespace | unknown
    routes: tuple[str, ...]
    version_line: str | None
    #: the arguments line's own template (`server_args={}`, `non-default args: {}`, `args: {}`)
    args_line_text: str = ""
    #: the serve parser's program as argparse prints it before `: error:` (`sglang serve`, `vllm serve`); None:
    #: argparse's default (argv[0]'s file name) or facts extracted before the program was recorded
    prog: str | None = None
    #: the program that reports unknown flags (vLLM: the `vllm` parser above `serve`)
    top_prog: str | None = None
    #: argparse's refusal lines with this release's programs, as templates (`sglang serve: error: unrecognized
    #: arguments: {}`); empty for facts extracted before they were recorded
    refusals: tuple[LogFormat, ...] = ()
    #: every spelling of every option, built once at load
    spellings: Mapping[str, OptionFact] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def option(self, spelling: str) -> OptionFact | None:
        """The option a spelling names exactly (`--tp-size`, `-tp`, `--no-enforce-eager`), or None."""
        return self._by_spelling().get(self._normal(spelling))

    def resolve_option(self, spelling: str) -> OptionFact | None:
        """The option the release's own parser takes a spelling for: exact, else (argparse's allow_abbrev) the one
        long option it is a unique prefix of. None: the parser refuses it (unknown, or an ambiguous prefix, which
        is how a removed `--cuda-graph-max-bs` fails once `--cuda-graph-max-bs-decode` and `-prefill` exist)."""
        s = self._normal(spelling)
        exact = self._by_spelling().get(s)
        if exact is not None or not self.allow_abbrev or not s.startswith("--"):
            return exact
        hits = {o.dest: o for sp, o in self._by_spelling().items() if sp.startswith(s) and sp.startswith("--")}
        return next(iter(hits.values())) if len(hits) == 1 else None

    def accepts(self, spelling: str) -> bool:
        return self.resolve_option(spelling) is not None

    def has_metric(self, family: str) -> MetricFact | None:
        for m in self.metrics:
            if family in (m.name, m.exposed) or family in m.samples():
                return m
        return None

    def _normal(self, spelling: str) -> str:
        spelling = spelling.split("=", 1)[0]
        if self.underscore_spellings and spelling.startswith("--"):
            return "--" + spelling[2:].replace("_", "-")
        return spelling

    def _by_spelling(self) -> Mapping[str, OptionFact]:
        return self.spellings


def _index(options: tuple[OptionFact, ...]) -> dict[str, OptionFact]:
    out: dict[str, OptionFact] = {}
    for o in options:
        for s in o.spellings():
            out.setdefault(s, o)
    return out


_FORMATTER = string.Formatter()


def version_key(version: str) -> tuple[int, ...]:
    """`0.5.15.post1` -> (0, 5, 15, 1); `0.10.1.1` -> (0, 10, 1, 1, 0); a suffix the numbers do not cover
    (`rc1`, `+cu128`, `-sim`) is ignored. Hand-written: `packaging` is not a dependency, and releases of these two
    servers are plain numbers with an optional `.postN`."""
    core = re.match(r"v?(\d+(?:\.\d+)*)(?:\.?post(\d+))?", version.strip())
    if not core:
        return ()
    nums = [int(p) for p in core[1].split(".")]
    while len(nums) < 4:
        nums.append(0)
    return (*nums, int(core[2] or 0))


def _load(raw: dict[str, object]) -> ReleaseFacts:
    def lst(key: str) -> list[dict[str, object]]:
        v = raw.get(key) or []
        return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []

    def tup(v: object) -> tuple[str, ...]:
        return tuple(str(x) for x in v) if isinstance(v, list | tuple) else ()

    wheel = raw.get("wheel") if isinstance(raw.get("wheel"), dict) else {}
    argp = raw.get("argparse") if isinstance(raw.get("argparse"), dict) else {}
    args_line = raw.get("args_line") if isinstance(raw.get("args_line"), dict) else {}
    version_line = raw.get("version_line")
    assert isinstance(wheel, dict) and isinstance(argp, dict) and isinstance(args_line, dict)
    options = tuple(OptionFact(
        dest=str(o.get("dest", "")), flags=tup(o.get("flags")), kind=str(o.get("kind", "unknown")),
        choices=tup(o["choices"]) if isinstance(o.get("choices"), list) else None,
        nargs=str(o["nargs"]) if o.get("nargs") is not None else None,
        negatable=bool(o.get("negatable", False)), deprecated=bool(o.get("deprecated", False)),
        deprecated_note=str(o.get("deprecated_note", "")), source=str(o.get("source", "")))
        for o in lst("options") if tup(o.get("flags")))
    return ReleaseFacts(
        server=str(raw["server"]), version=str(raw["version"]),
        wheel_file=str(wheel.get("file", "")), wheel_sha256=str(wheel.get("sha256", "")),
        allow_abbrev=bool(argp.get("allow_abbrev", True)),
        underscore_spellings=bool(argp.get("underscore_spellings", False)),
        options=options, spellings=_index(options),
        positionals=tuple(str(p.get("dest", "")) for p in lst("positionals")),
        metrics=tuple(MetricFact(
            name=str(m.get("name", "")), type=str(m.get("type", "")), labels=tup(m.get("labels")),
            optional_labels=tup(m.get("optional_labels")),
            labels_resolved=bool(m.get("labels_resolved", True)), collector=str(m.get("collector", "")),
            updated_in=tup(m.get("updated_in")), source=str(m.get("source", ""))) for m in lst("metrics")),
        args_line_form=str(args_line.get("form", "unknown")), args_line_text=str(args_line.get("text", "")),
        routes=tuple(str(r.get("path", "")) for r in lst("routes")),
        version_line=(str(version_line.get("text")) if isinstance(version_line, dict)
                      else str(version_line) if isinstance(version_line, str) else None),
        prog=str(argp["prog"]) if isinstance(argp.get("prog"), str) else None,
        top_prog=str(argp["top_prog"]) if isinstance(argp.get("top_prog"), str) else None,
        refusals=tuple(LogFormat(str(t), "argparse error()", str(argp.get("source", "")))
                       for t in argp.get("refusals") or () if isinstance(t, str)),
    )


def _log_formats(raw: list[dict[str, object]]) -> tuple[LogFormat, ...]:
    """Log formats grouped by file (`{"file": path, "entries": [[line, via, text], ...]}`), or one record each
    (`{"text", "via", "source"}`, the older layout)."""
    out: list[LogFormat] = []
    for g in raw:
        entries = g.get("entries")
        if not isinstance(entries, list):
            out.append(LogFormat(str(g.get("text", "")), str(g.get("via", "")), str(g.get("source", ""))))
            continue
        path = str(g.get("file", ""))
        out.extend(LogFormat(str(e[2]), str(e[1]), f"{path}:{e[0]}") for e in entries
                   if isinstance(e, list) and len(e) == 3)
    return tuple(sorted(out, key=lambda f: f.text))


@cache
def known_versions(server: str) -> tuple[str, ...]:
    """The releases of a server with committed facts, oldest first, read off the files' names
    (`sglang-0.5.23.json`): knowing which releases exist costs no parsing (every release's facts together are about
    9 MiB of objects, a third of the console's own memory; a process needs one or two)."""
    folder = resources.files(__package__).joinpath("facts")
    if not folder.is_dir():
        return ()
    prefix = server + "-"
    found = [entry.name[len(prefix):-len(".json")] for entry in folder.iterdir()
             if entry.name.startswith(prefix) and entry.name.endswith(".json")]
    return tuple(sorted(found, key=version_key))


def _file(server: str, version: str) -> Traversable:
    return resources.files(__package__).joinpath("facts").joinpath(f"{server}-{version}.json")


@lru_cache(maxsize=32)
def release_facts(server: str, version: str) -> ReleaseFacts:
    """One release's facts, read when first asked for, then kept: a console asks for one or two (the newest known,
    and the server's own)."""
    entry = _file(server, version)
    facts = _load(json.loads(entry.read_text(encoding="utf-8")))
    if (facts.server, facts.version) != (server, version):
        raise ValueError(f"{entry.name} holds the facts of {facts.server} {facts.version}")
    return facts


def log_formats(server: str, version: str) -> tuple[LogFormat, ...]:
    """Every message the release's code can print, read from its file at each call: the conformance tests' question
    (are the presets' wordings the release's own?), never asked at run time, so never held by a console (5,500
    formats of a recent SGLang are 2 MiB of objects)."""
    raw = json.loads(_file(server, version).read_text(encoding="utf-8"))
    formats = raw.get("log_formats") if isinstance(raw, dict) else None
    return _log_formats([g for g in formats if isinstance(g, dict)] if isinstance(formats, list) else [])


def releases(server: str) -> tuple[ReleaseFacts, ...]:
    """Every release of a server with committed facts, oldest first: loads them all (the conformance tests'
    question, not the console's: it asks `resolve`)."""
    return tuple(release_facts(server, v) for v in known_versions(server))


@dataclass(frozen=True, slots=True)
class ReleaseMatch:
    """The facts bringup goes by for a server, and how sure it is of them: `exact` when the server's own release
    has facts; otherwise `note` says which release's facts stand in, so a screen never claims more than it knows."""

    facts: ReleaseFacts | None
    version: str | None
    exact: bool
    note: str

    @property
    def label(self) -> str:
        """`0.5.23`, `0.5.24 (facts of 0.5.23)`, `unknown (facts of 0.5.23)`."""
        if self.facts is None:
            return self.version or "unknown"
        if self.exact:
            return self.version or self.facts.version
        return f"{self.version or 'unknown'} (facts of {self.facts.version})"


def resolve(server: str, version: str | None) -> ReleaseMatch:
    """The facts for a server's release: its own, else the newest older release's (what changed since is not
    known), else, for a release newer than all or one not known yet, the newest's; said so either way."""
    known = known_versions(server)
    if not known:
        return ReleaseMatch(None, version, False, f"no release facts for {server}")
    newest = known[-1]
    if not version or not version_key(version):
        return ReleaseMatch(release_facts(server, newest), None, False,
                            f"release not known yet: going by the newest known, {newest}")
    key = version_key(version)
    for v in known:
        if version_key(v) == key:
            return ReleaseMatch(release_facts(server, v), version, True, "")
    older = [v for v in known if version_key(v) < key]
    if not older:
        return ReleaseMatch(release_facts(server, known[0]), version, False,
                            f"{version} is older than every known release: going by the oldest, {known[0]}")
    best = older[-1]
    if best == newest:
        return ReleaseMatch(release_facts(server, best), version, False,
                            f"{version} is newer than the newest known release: going by {best}")
    return ReleaseMatch(release_facts(server, best), version, False,
                        f"{version} has no facts: going by {best}, the closest older")
