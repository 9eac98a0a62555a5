"""The presets against the releases' own code: every wording, flag, hint and metric bringup relies on is checked
against the facts extracted from the released wheels (tui/lifecycle/presets/facts/, written by
`python -m tools.serverfacts`). No download here: the facts are committed, each with its wheel's sha256.

A failure here means the tool disagrees with a release people run: fix the preset (or refresh the facts for a new
release), never the test.
"""

from __future__ import annotations

import re

import pytest

from tui.lifecycle.presets import Alternation, Preset, Releases
from tui.lifecycle.presets.facts import ReleaseFacts, known_versions, log_formats, releases, resolve, version_key
from tui.lifecycle.presets.registry import PRESETS
from tui.model import FailureKind, Phase

#: every release with committed facts is covered (docs/servers-and-releases.md lists these:
#: tests/infra/test_release_coverage_readme.py)
#: (older facts are kept for history: vLLM 0.5.5 and 0.6.6, below the supported range)
SUPPORTED_FROM = {"sglang": "0.4.10", "vllm": "0.8.5"}
LISTED = {name: tuple(v for v in known_versions(name) if version_key(v) >= version_key(SUPPORTED_FROM[name]))
          for name in PRESETS}
#: the releases every SGLang 0.5.x and every vLLM minor from 0.8 must have facts for, at least (issue 48)
REQUIRED = {
    "sglang": ("0.4.10", *(f"0.5.{n}" for n in range(1, 24))),
    "vllm": ("0.8.5", "0.9.2", "0.10.2", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.14.1", "0.15.0", "0.15.1",
             "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2",
             "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1",
             "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0"),
}


def _rendered(facts: ReleaseFacts) -> list[str]:
    """Each message rendered twice: every field a number-like "1", and every text field empty (SGLang's
    `Prefill batch{iter_msg}, ...` reads `Prefill batch, ...` when its optional part is empty)."""
    out = []
    for f in log_formats(facts.server, facts.version):
        for sample in ("1", ""):
            text = f.render(sample)
            if text is not None:
                out.append(text)
    return out


_RENDERED: dict[tuple[str, str], list[str]] = {}


def rendered(facts: ReleaseFacts) -> list[str]:
    key = (facts.server, facts.version)
    if key not in _RENDERED:
        _RENDERED[key] = _rendered(facts)
    return _RENDERED[key]


def matches_in(alt: str, flags: int, texts: list[str]) -> bool:
    rx = re.compile(alt, flags | re.MULTILINE)
    return any(rx.search(t) for t in texts)


@pytest.mark.parametrize("server", sorted(LISTED))
def test_the_listed_releases_have_facts_with_their_provenance(server: str) -> None:
    have = {f.version: f for f in releases(server)}
    missing = [v for v in REQUIRED[server] if v not in have]
    assert not missing, f"no facts committed for {server} {missing}: run `python -m tools.serverfacts`"
    for f in have.values():
        assert re.fullmatch(r"[0-9a-f]{64}", f.wheel_sha256), f"{server} {f.version}: no wheel sha256"
        assert f.wheel_file.startswith(server + "-" + f.version), f.wheel_file
        formats = log_formats(server, f.version)
        assert len(f.options) > 50 and len(formats) > 200 and f.metrics, \
            f"{server} {f.version}: facts look empty ({len(f.options)} options, {len(formats)} log formats)"


def test_resolve_says_which_facts_stand_in() -> None:
    newest = releases("sglang")[-1]
    assert resolve("sglang", newest.version).exact
    newer = resolve("sglang", "99.0.0")
    assert newer.facts is newest and not newer.exact and "newer than the newest" in newer.note
    unknown = resolve("sglang", None)
    assert unknown.facts is newest and "not known" in unknown.note
    before = known_versions("sglang")[-2]
    between = resolve("sglang", before + ".post99")
    assert between.facts is not None and between.facts.version == before and not between.exact
    assert "closest older" in between.note
    assert version_key("0.5.15.post1") > version_key("0.5.15") > version_key("0.5.9")


def _alternations(preset: Preset) -> list[tuple[str, Alternation]]:
    out: list[tuple[str, Alternation]] = [("ready", preset.ready), ("fatal", preset.fatal)]
    out += [(f"marker {m.phase.value}", m.pattern) for m in preset.markers]
    out += [(f"classifier {c.kind.value}", c.pattern) for c in preset.classifiers]
    for name in ("serving", "stopping", "consequence", "graph_evidence", "version_line"):
        alt = getattr(preset, name)
        if alt is not None:
            out.append((name, alt))
    return out


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_wording_is_a_releases_own_or_a_named_librarys(name: str) -> None:
    """Each alternative of each wording list matches a message some covered release can log (its format string
    rendered with sample values), or is declared as another program's words (PyTorch, NCCL, uvicorn, argparse)."""
    preset = PRESETS[name]
    # the wordings both servers share (PyTorch's, common.py) are checked against either server's releases
    texts = [t for server in PRESETS for f in releases(server) for t in rendered(f)]
    foreign = preset.foreign_wordings
    templates = {f.text for server in PRESETS for r in releases(server)
                 for f in log_formats(server, r.version)}
    templates |= {r.args_line_text for server in PRESETS for r in releases(server)}
    bad = []
    for where, alt in _alternations(preset):
        flags = alt.regex.flags & (re.IGNORECASE | re.MULTILINE)
        for a in alt.alternatives:
            if a in foreign:
                continue
            if a in preset.value_wordings:
                if preset.value_wordings[a] not in templates:
                    bad.append(f"{where}: {a!r} (its template {preset.value_wordings[a]!r} is in no release)")
                continue
            if not matches_in(a, flags, texts):
                bad.append(f"{where}: {a!r}")
    assert not bad, f"{name}: wordings no covered release logs (nor declared foreign):\n" + "\n".join(bad)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_foreign_wordings_are_not_the_servers_own_words(name: str) -> None:
    """A wording declared as a library's must not be one the server's own code logs: else it belongs with the
    checked ones (the declaration would hide a release that stops logging it)."""
    preset = PRESETS[name]
    texts = [t for server in PRESETS for f in releases(server) for t in rendered(f)]
    own = [a for a in preset.foreign_wordings if matches_in(a, 0, texts)]
    assert not own, f"{name}: declared foreign but logged by the server itself: {own}"


@pytest.mark.parametrize(("name", "version"), [(n, v) for n in sorted(PRESETS) for v in LISTED.get(n, ())])
def test_every_phase_is_seen_on_every_release(name: str, version: str) -> None:
    """On each covered release, each start-up phase has a line the preset recognises (a renamed line leaves the
    phase unseen: vLLM 0.34's `Loading model from scratch`)."""
    preset = PRESETS[name]
    facts = resolve(name, version).facts
    assert facts is not None
    texts = rendered(facts)
    for marker in preset.markers:
        own = [a for a in marker.pattern.alternatives if a not in preset.foreign_wordings]
        hit = [a for a in own if matches_in(a, marker.pattern.regex.flags & re.IGNORECASE, texts)]
        assert hit or (marker.phase == Phase.WARMUP and not own), \
            f"{name} {version}: no line of phase {marker.phase.value} is recognised"
    assert any(preset.ready.search(t) for t in texts) or all(a in preset.foreign_wordings
                                                             for a in preset.ready.alternatives)


@pytest.mark.parametrize(("name", "version"), [(n, f.version) for n in sorted(PRESETS) for f in releases(n)])
def test_every_marker_wording_on_exactly_its_releases(name: str, version: str) -> None:
    """Each phase marker wording matches a line of exactly the releases the preset says log it (`wording_releases`;
    unlisted: every release): a wording a release drops, or a new one it logs instead (SGLang 0.5.21's `Init
    parallel begin.`), fails here until the preset says so, where one marker per phase would still pass."""
    preset = PRESETS[name]
    facts = resolve(name, version).facts
    assert facts is not None and facts.version == version
    texts = rendered(facts)
    bad = []
    for marker in preset.markers:
        for a in marker.pattern.alternatives:
            if a in preset.foreign_wordings or a in preset.value_wordings:
                continue
            says = preset.wording_releases.get(a, Releases()).covers(version)
            logs = matches_in(a, marker.pattern.regex.flags & re.IGNORECASE, texts)
            if says != logs:
                said = "logged, but not declared" if logs else "declared, not logged"
                bad.append(f"{marker.phase.value} {a!r}: {said}")
    assert not bad, f"{name} {version}:\n" + "\n".join(bad)


_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*[a-z0-9])")
_SET = re.compile(r"--(?:set|unset) ([a-z][a-z0-9-]*)")


def _flags_named(text: str) -> set[str]:
    names = {m[1] for m in _OPTION.finditer(text)} | {m[1] for m in _SET.finditer(text)}
    return names - {"set", "unset"}


@pytest.mark.parametrize(("name", "version"), [(n, v) for n in sorted(PRESETS) for v in LISTED.get(n, ())])
def test_hints_name_only_flags_of_their_release(name: str, version: str) -> None:
    preset = PRESETS[name]
    facts = resolve(name, version).facts
    assert facts is not None
    specialised = preset.for_release(facts)
    flag_sets: list[dict[str, str | None]] = [{}, {"speculative-algorithm": "DFLASH"}]
    bad = []
    for kind in FailureKind:
        for phase in Phase:
            for flags in flag_sets:
                text = specialised.hint(kind, phase, flags)
                for flag in _flags_named(text):
                    if facts.option("--" + flag) is None:
                        bad.append(f"{kind.value}/{phase.value}: --{flag}")
    assert not bad, f"{name} {version}: hints name flags the release does not have: {sorted(set(bad))}"


@pytest.mark.parametrize(("name", "version"), [(n, v) for n in sorted(PRESETS) for v in LISTED.get(n, ())])
def test_the_flags_offered_are_the_releases_own(name: str, version: str) -> None:
    """What the flags dialog lists and `--set` takes on a release is what that release's parser accepts, by the
    spelling bringup writes, with the release's own kind and choices."""
    preset = PRESETS[name]
    facts = resolve(name, version).facts
    assert facts is not None
    for spec in preset.for_release(facts).flags:
        opt = facts.option(spec.option)
        assert opt is not None, f"{name} {version}: offers {spec.option}, which the release does not have"
        assert (spec.kind == "bool") == (opt.kind == "bool"), f"{spec.option}: {spec.kind} vs {opt.kind}"
        if spec.kind == "choice" and opt.choices:
            assert set(spec.choices) <= set(opt.choices), f"{spec.option}: {spec.choices} vs {opt.choices}"
        for other in spec.all_options():
            assert facts.resolve_option(other) is opt, f"{name} {version}: {other} (of {spec.name}) not a spelling"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_flag_a_preset_knows_is_in_some_release(name: str) -> None:
    preset = PRESETS[name]
    known = releases(name)
    stale = [s.option for s in preset.flags if not any(f.option(s.option) for f in known)]
    assert not stale, f"{name}: flags no covered release has: {stale}"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_metrics_read_exist_with_the_labels_read(name: str) -> None:
    """Every series the collectors and the sweep read, and every label they filter or group by, is one a covered
    release exports (the metric's own label set in its facts)."""
    preset = PRESETS[name]
    assert preset.metrics is not None
    known = releases(name)
    bad = []
    for family, labels in preset.metrics.reads().items():
        having = [f for f in known if f.has_metric(family)]
        if not having:
            bad.append(f"{family}: in no covered release")
            continue
        for label in labels:
            if not any(label in (*m.labels, *m.optional_labels) for f in having
                       if (m := f.has_metric(family)) is not None):
                bad.append(f"{family}: no release gives it the label {label!r}")
    assert not bad, f"{name}: " + "; ".join(bad)
