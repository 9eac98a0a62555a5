"""The documented list of covered releases (docs/servers-and-releases.md, linked from the README) is the facts
directory itself: a release whose facts are committed is listed, and a listed one has facts (issue 48). A hand-kept
list drifted from the files twice; here the files decide and the page is read back against them."""

from __future__ import annotations

import re
from pathlib import Path

from tui.lifecycle.presets.facts import known_versions
from tui.lifecycle.presets.registry import PRESETS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "servers-and-releases.md"
#: the coverage table's rows: `| SGLang | 0.4.10, 0.5.1, ... |`
_ROW = re.compile(r"^\| (?P<server>[^|]+?) \| (?P<versions>\d[^|]*?) \|$", re.M)


def _documented_coverage() -> dict[str, tuple[str, ...]]:
    page = PAGE.read_text(encoding="utf-8")
    table = page.split("| server | releases with facts (covered) |", 1)[1].split("\n\n", 1)[0]
    names = {PRESETS[n].display_name: n for n in PRESETS}
    out: dict[str, tuple[str, ...]] = {}
    for m in _ROW.finditer(table):
        server = names.get(m["server"].strip())
        assert server is not None, f"{PAGE.name}: coverage row for an unknown server: {m['server']!r}"
        out[server] = tuple(v.strip() for v in m["versions"].split(","))
    return out


def test_the_readme_lists_exactly_the_releases_with_facts() -> None:
    listed = _documented_coverage()
    assert set(listed) == set(PRESETS), f"{PAGE.name}: one coverage row per server, found {sorted(listed)}"
    for name in PRESETS:
        have = known_versions(name)
        assert listed.get(name) == have, (
            f"{PAGE.name}: the {PRESETS[name].display_name} row must list the facts directory's releases, "
            "oldest first:\n"
            f"| {PRESETS[name].display_name} | {', '.join(have)} |")
