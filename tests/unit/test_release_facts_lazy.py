"""A process reads the facts of the releases it is asked about, not every release's: all of them together are about
9 MiB of objects, a third of what the console holds (benchmarks/console_vs_nvitop.py's RSS)."""

from __future__ import annotations

import pytest

from tui.lifecycle.presets.facts import known_versions, release_facts, releases, resolve, version_key


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    release_facts.cache_clear()


def test_resolving_a_release_reads_that_release_only() -> None:
    known = known_versions("sglang")
    assert len(known) >= 3
    match = resolve("sglang", known[1])
    assert match.exact and match.facts is not None and match.facts.version == known[1]
    assert release_facts.cache_info().currsize == 1
    assert resolve("sglang", None).facts == release_facts("sglang", known[-1])
    assert release_facts.cache_info().currsize == 2


def test_the_names_of_the_files_are_the_releases_they_hold_oldest_first() -> None:
    for server in ("sglang", "vllm"):
        versions = known_versions(server)
        assert versions == tuple(sorted(versions, key=version_key))
        assert [f.version for f in releases(server)] == list(versions)
        assert {f.server for f in releases(server)} == {server}


def test_a_release_between_two_known_goes_by_the_closest_older_without_reading_the_others() -> None:
    known = known_versions("sglang")
    lo, hi = version_key(known[-2]), version_key(known[-1])
    between = f"{known[-2]}.post99"  # every release has facts: a post-release of the one before the newest
    assert lo < version_key(between) < hi
    match = resolve("sglang", between)
    assert not match.exact and match.facts is not None and match.facts.version == known[-2]
    assert release_facts.cache_info().currsize == 1
