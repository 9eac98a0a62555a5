"""A preset as one release of its server sees it: the flags that release's parser takes, with its own choices, and
hints that name only those flags.

A preset lists every flag bringup can edit across the releases it covers; a release removes some (SGLang 0.5.20
dropped `--cuda-graph-max-bs`), deprecates others (0.5.14 and later: `--disable-cuda-graph`, now
`--cuda-graph-backend-{decode,prefill}=disabled`) and adds choices (`--speculative-algorithm`). Offering a flag the
release refuses makes the server refuse its whole command line at the next restart, the opposite of what a hint
is for. So the flags dialog, `--set` and the hints go through `Preset.for_release(facts)`, cached per release.
"""

from __future__ import annotations

from dataclasses import replace

from tui.lifecycle.presets import FlagSpec, Preset
from tui.lifecycle.presets.facts import ReleaseFacts, resolve

__all__ = ["for_release", "release_preset"]


def release_preset(preset: Preset, version: str | None) -> Preset:
    """The preset for a run of `version` (None: the run has not said it yet: the newest facts, conservatively)."""
    return for_release(preset, resolve(preset.name, version).facts, known=version is not None)


def _offered(spec: FlagSpec, facts: ReleaseFacts) -> FlagSpec | None:
    opt = facts.option(spec.option)
    if opt is None:
        return None
    # spellings kept are the ones this release's parser maps to the same option (an abbreviation such as SGLang's
    # `--tp` counts: argv written by hand uses it and must still be read as this flag)
    aliases = tuple(a for a in spec.aliases if facts.resolve_option("--" + a) is opt)
    short = tuple(s for s in spec.short if facts.option("-" + s) is opt)
    choices = spec.choices
    if spec.kind == "choice" and opt.choices:
        choices = opt.choices  # the release's own list: newer algorithms offered, removed ones not
    about = spec.help + (" (deprecated in this release)" if opt.deprecated and "deprecated" not in spec.help else "")
    return replace(spec, aliases=aliases, short=short, choices=choices, help=about)


#: by (preset, release): built once per release a deployment runs (keyed by name, not by hashing the facts' tables)
_CACHE: dict[tuple[int, str, str, bool], tuple[Preset, Preset]] = {}


def _specialise(preset: Preset, facts: ReleaseFacts, known: bool) -> Preset:
    offered = {s.name: s for s in (_offered(spec, facts) for spec in preset.flags) if s is not None}
    # a key whose flag this release lacks or deprecates moves to the flag that took over its job
    for spec in preset.flags:
        heir = offered.get(spec.name)
        if heir is None or not spec.takes_key_from:
            continue
        old = offered.get(spec.takes_key_from)
        old_opt = facts.option("--" + spec.takes_key_from)
        if old_opt is None or (old_opt.deprecated and known):
            key = next((s.key for s in preset.flags if s.name == spec.takes_key_from), "")
            offered[spec.name] = replace(heir, key=key)
            if old is not None:
                offered[old.name] = replace(old, key="")
    flags = tuple(offered[s.name] for s in preset.flags if s.name in offered)
    hint = preset.hints_for(facts, known) if preset.hints_for is not None else preset.hint
    return replace(preset, flags=flags, hint=hint, release=facts.version if known else "")


def for_release(preset: Preset, facts: ReleaseFacts | None, known: bool = True) -> Preset:
    """The preset for one release (itself when no facts are known). `known=False`: the run has not said its release
    yet and `facts` are the newest's: only flags the newest takes are offered, but a key or hint keeps the spelling
    most releases accept while the newest still does (a deprecated `--disable-cuda-graph` over 0.5.23's
    `--cuda-graph-backend-decode`, which 0.5.17 and older refuse)."""
    if facts is None or facts.server != preset.name:
        return preset
    key = (id(preset), facts.server, facts.version, known)
    got = _CACHE.get(key)
    if got is None or got[0] is not preset:
        got = _CACHE[key] = (preset, _specialise(preset, facts, known))
    return got[1]
