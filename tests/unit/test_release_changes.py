"""Change between releases, seen and declared (issue 48, items 4 and 5): each release's facts against the one before.

Per-release checks cannot see a rename: a release identical to SGLang 0.5.23 but with `--cuda-graph-backend-{decode,
prefill}` renamed passes them all, while bringup falls back to the deprecated `--disable-cuda-graph`. Here every
difference between consecutive releases in what a preset relies on (its flags and their choices and deprecations,
the metrics it reads, the wordings it matches, the program argparse refuses with) must be declared with its
treatment (tui/lifecycle/presets/sglang_changes.py, vllm_changes.py), and a declaration no difference backs fails too.

When this fails after new facts: read the listed changes, teach the preset (flags, hints, metrics, wordings), then
declare each change with how the preset now treats it.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from tui.lifecycle.presets import Preset
from tui.lifecycle.presets.declared_changes import DECLARED
from tui.lifecycle.presets.facts import ReleaseFacts, _index, known_versions, releases
from tui.lifecycle.presets.registry import PRESETS
from tui.lifecycle.presets.release_changes import (
    Change,
    ChangeKind,
    ReleaseChange,
    Treatment,
    differences,
    release_text,
    undeclared,
    watched_wordings,
)
from tui.lifecycle.replay import replay
from tui.model import FailureKind, Phase

_TEXTS: dict[tuple[str, str], str] = {}


def _text(f: ReleaseFacts) -> str:
    key = (f.server, f.version)
    if key not in _TEXTS:
        _TEXTS[key] = release_text(f)
    return _TEXTS[key]


def _wordings(preset: Preset) -> dict[str, int]:
    """The preset's wordings held by this diff: every alternative of every list, except another program's
    (foreign), a value's, and the markers held per release by `wording_releases` (test_conformance.py)."""
    lists = [preset.ready, preset.fatal, *(m.pattern for m in preset.markers), *(c.pattern for c in preset.classifiers)]
    lists += [a for a in (preset.serving, preset.stopping, preset.consequence, preset.graph_evidence,
                          preset.version_line) if a is not None]
    out: dict[str, int] = {}
    for alt in lists:
        for a in alt.alternatives:
            if a not in preset.foreign_wordings and a not in preset.value_wordings and a not in preset.wording_releases:
                out[a] = alt.regex.flags & re.IGNORECASE
    return out


_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])")
_SET = re.compile(r"--(?:set|unset) ([a-z][a-z0-9-]*)")
_HINT_FLAGS: dict[tuple[str, str], frozenset[str]] = {}
_HINT_FLAG_SETS: tuple[dict[str, str | None], ...] = ({}, {"speculative-algorithm": "DFLASH"})


def _hint_flags(preset: Preset, facts: ReleaseFacts) -> frozenset[str]:
    """The flags the release's own hints name (what an operator is told to set)."""
    key = (facts.server, facts.version)
    if key not in _HINT_FLAGS or facts.version not in known_versions(facts.server):
        p = preset.for_release(facts)
        names: set[str] = set()
        for kind in FailureKind:
            for phase in Phase:
                for flags in _HINT_FLAG_SETS:
                    text = p.hint(kind, phase, flags)
                    names |= {m[1] for m in _OPTION.finditer(text)} | {"--" + m[1] for m in _SET.finditer(text)}
        _HINT_FLAGS[key] = frozenset(names - {"--set", "--unset"})
    return _HINT_FLAGS[key]


def _flags(preset: Preset, facts: list[ReleaseFacts]) -> list[str]:
    """The flags a preset relies on: the ones it edits (every spelling) and every flag a release's hints name."""
    edited = {o for s in preset.flags for o in s.all_options() if o.startswith("--")}
    return sorted(edited.union(*(_hint_flags(preset, f) for f in facts)))


def changes_of(preset: Preset, facts: list[ReleaseFacts], like: ReleaseFacts | None = None) -> list[Change]:
    """The differences over `facts`; `like`: the release a doctored last one was made from (its log formats)."""
    metrics = sorted(preset.metrics.reads()) if preset.metrics is not None else []
    texts = [(f, _text(like if like is not None and i == len(facts) - 1 else f)) for i, f in enumerate(facts)]
    seen = watched_wordings(_wordings(preset).items(), texts)
    offered = [s.option for s in preset.flags if s.kind == "choice"]
    return differences(facts, _flags(preset, facts), metrics, seen, offered)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_change_between_releases_is_declared(name: str) -> None:
    preset = PRESETS[name]
    facts = list(releases(name))
    missing, stale = undeclared(changes_of(preset, facts), DECLARED[name])
    assert not missing, (f"{name}: changes between releases the preset does not declare (teach the preset, then "
                         f"declare each in its *_changes.py):\n" + "\n".join(map(str, missing)))
    assert not stale, f"{name}: declared changes the facts do not show:\n" + "\n".join(
        f"{d.release}: {d.kind.value}: {d.subject}" for d in stale)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_declared_treatments_are_what_the_preset_does(name: str) -> None:
    """A declaration's words are checked against the preset where code can check them: a key said to move has a
    flag that takes it, a successor flag is one the preset edits, a successor metric one it reads, a successor
    wording one it matches."""
    preset = PRESETS[name]
    specs = {s.option: s for s in preset.flags}
    options = {o for s in preset.flags for o in s.all_options()}
    reads = set(preset.metrics.reads()) if preset.metrics is not None else set()
    wordings = {a for alt in (preset.ready, preset.fatal, *(m.pattern for m in preset.markers),
                              *(c.pattern for c in preset.classifiers)) for a in alt.alternatives}
    known = releases(name)
    bad = []
    for d in DECLARED[name]:
        flag = d.subject.split("=", 1)[0]
        if d.treatment is Treatment.KEY_MOVES:
            heir = specs.get(d.successor)
            if heir is None or "--" + heir.takes_key_from != flag:
                bad.append(f"{d.subject}: its key is said to move to {d.successor}, which does not take it")
        elif d.treatment in (Treatment.OFFERED_WHERE_TAKEN, Treatment.CHOICES_FROM_RELEASE) and flag not in options:
            bad.append(f"{d.subject}: said to be offered per release, but the preset does not edit {flag}")
        elif d.treatment is Treatment.HINTED_WHERE_TAKEN and not any(flag in _hint_flags(preset, f) for f in known):
            bad.append(f"{d.subject}: said to be named in hints, but no release's hints name it")
        elif d.treatment is Treatment.METRIC_SUCCESSOR and d.successor not in reads:
            bad.append(f"{d.subject}: successor {d.successor} is not read")
        elif d.treatment is Treatment.WORDING_KEPT and d.successor and d.successor not in wordings:
            bad.append(f"{d.subject}: successor wording {d.successor!r} is not the preset's")
        if d.kind is ChangeKind.FLAG_LIKE_ADDED and d.treatment is Treatment.NOT_RELIED_ON and not d.why:
            bad.append(f"{d.subject}: a rename candidate not relied on must say why")
    assert not bad, f"{name}:\n" + "\n".join(bad)


def _doctored(base: ReleaseFacts, version: str, renames: dict[str, str]) -> ReleaseFacts:
    """`base` as a next release `version` with options renamed (every spelling `old` -> `new`)."""
    options = tuple(replace(o, flags=tuple(renames.get(f, f) for f in o.flags)) for o in base.options)
    return replace(base, version=version, options=options, spellings=_index(options))


def test_a_release_renaming_the_cuda_graph_backends_fails_the_diff() -> None:
    """Item 5: 0.5.23 with `--cuda-graph-backend-{decode,prefill}` renamed: a difference no declaration covers,
    the new names shown as rename candidates."""
    preset = PRESETS["sglang"]
    known = list(releases("sglang"))
    newest = known[-1]
    renamed = _doctored(newest, "99.0.0", {"--cuda-graph-backend-decode": "--cuda-graph-runner-decode",
                                           "--cuda-graph-backend-prefill": "--cuda-graph-runner-prefill"})
    missing, _stale = undeclared(changes_of(preset, [*known, renamed], newest), DECLARED["sglang"])
    said = {(c.kind, c.subject) for c in missing}
    assert (ChangeKind.FLAG_GONE, "--cuda-graph-backend-decode") in said
    assert (ChangeKind.FLAG_GONE, "--cuda-graph-backend-prefill") in said
    assert (ChangeKind.FLAG_LIKE_ADDED, "--cuda-graph-runner-decode") in said
    assert (ChangeKind.FLAG_LIKE_ADDED, "--cuda-graph-runner-prefill") in said
    # the same release unchanged is no difference at all
    same, _ = undeclared(changes_of(preset, [*known, replace(newest, version="99.0.0")], newest), DECLARED["sglang"])
    assert not same, same


def test_a_deprecation_a_removed_choice_a_metric_and_a_program_change_each_fail_the_diff() -> None:
    preset = PRESETS["sglang"]
    known = list(releases("sglang"))
    newest = known[-1]
    options = tuple(replace(o, deprecated=True) if o.long == "--mem-fraction-static" else
                    replace(o, choices=tuple(c for c in o.choices or () if c != "breakable"))
                    if o.long == "--cuda-graph-backend-decode" else o for o in newest.options)
    read = sorted(preset.metrics.reads()) if preset.metrics is not None else []
    metric = next(m for m in newest.metrics if m.exposed in read or m.name in read)
    metrics = tuple(replace(m, name=m.name + "_v2") if m is metric else m for m in newest.metrics)
    doctored = replace(newest, version="99.0.0", options=options, spellings=_index(options), metrics=metrics,
                       prog="sglang launch", refusals=newest.refusals or ())
    missing, _ = undeclared(changes_of(preset, [*known, doctored], newest), DECLARED["sglang"])
    said = {(c.kind, c.subject) for c in missing}
    assert (ChangeKind.FLAG_DEPRECATED, "--mem-fraction-static") in said
    assert (ChangeKind.CHOICE_GONE, "--cuda-graph-backend-decode=breakable") in said
    assert any(k is ChangeKind.METRIC_GONE for k, _ in said), said
    if newest.refusals:
        assert (ChangeKind.PROG_CHANGED, "prog") in said


def test_a_declaration_without_its_change_is_stale() -> None:
    extra = ReleaseChange("0.5.23", ChangeKind.FLAG_GONE, "--mem-fraction-static", Treatment.NOT_RELIED_ON, why="x")
    _, stale = undeclared(changes_of(PRESETS["sglang"], list(releases("sglang"))), (*DECLARED["sglang"], extra))
    assert stale == [extra]


# ------------------------------------------------------------------ argparse's refusal, per release


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_newest_releases_record_their_refusal_program(name: str) -> None:
    """The facts of the releases added with this check record `prog` and argparse's refusal lines (older files were
    extracted before and stay byte-identical)."""
    recorded = [f for f in releases(name) if f.refusals]
    assert recorded, f"{name}: no release's facts record its refusal lines"
    want = {"sglang": "sglang serve", "vllm": "vllm serve"}[name]
    assert any(f.prog == want for f in recorded), {f.version: f.prog for f in recorded}


@pytest.mark.parametrize(("name", "version"), [(n, f.version) for n in sorted(PRESETS) for f in releases(n)
                                               if f.refusals])
def test_every_refusal_wording_of_every_release_is_bad_args(name: str, version: str) -> None:
    """Each refusal line argparse can print for the release, under its own program names, ends a start-up as
    bad-args with a hint naming the flag refused."""
    facts = next(f for f in releases(name) if f.version == version)
    bad = []
    for template in facts.refusals:
        line = template.render("--tp-size")
        assert line is not None
        s = replay([line], name).state
        failure = s.failure
        if s.phase != Phase.FAILED or failure is None or failure.kind != FailureKind.BAD_ARGS:
            bad.append(f"{line!r}: {s.phase} {failure and failure.kind}")
        elif "--tp-size" not in failure.hint and "could match" not in line:
            bad.append(f"{line!r}: hint does not name the flag: {failure.hint}")
    assert not bad, f"{name} {version}:\n" + "\n".join(bad)
