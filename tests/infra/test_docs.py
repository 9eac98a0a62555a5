"""The README is what a newcomer reads first, so it stays short and opens with the two commands that work from a
fresh clone; everything else lives in docs/ (issue 49, item 7). Pages moved out of a README lose their readers when
nothing links to them and rot when their links and anchors break silently, so: the README links every page, and
every relative link and anchor in the README, docs/ and tests/README.md resolves (as GitHub renders them)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS, ROOT / "tests" / "README.md"]

#: the two commands, byte for byte as they have always been: the demo, then the tests
DEMO = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/bringup demo"
TESTS = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest -q"

_FENCE = re.compile(r"^(`{3,})")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a heading or a link inside a fence is an example, not the page's)."""
    out, fence = [], ""
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m and not fence:
            fence = m.group(1)
        elif m and line.strip() == fence:
            fence = ""
        elif not fence:
            out.append(line)
    return out


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text(encoding="utf-8")):
        if m := re.match(r"^#{1,6} (.+?)\s*$", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            if seen[slug]:
                seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```\w*\n(.*?)^```", text, re.S | re.M)


def test_the_readme_is_short() -> None:
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= 300, f"README.md has {n} lines: a user's page holds 300 at most, the rest goes to docs/"


def test_the_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert code_blocks(text)[:2] == [DEMO + "\n", TESTS + "\n"], code_blocks(text)[:2]
    assert text.index(DEMO) < text.index(TESTS) < text.index("\n## ")  # both before the first section
    assert code_blocks((ROOT / "tests" / "README.md").read_text(encoding="utf-8"))[0] == TESTS + "\n"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")  # CI runs the command the README gives
    assert ".venv/bin/pip install -q -e '.[test]'" in ci and "\n.venv/bin/pytest -q\n" in ci


def test_the_readme_links_every_docs_page() -> None:
    targets = {m.group(1).split("#", 1)[0] for line in prose_lines(README.read_text(encoding="utf-8"))
               for m in _LINK.finditer(line)}
    assert DOCS, "docs/ has no pages"
    unlinked = [p.name for p in DOCS if f"docs/{p.name}" not in targets]
    assert unlinked == [], f"README.md links no page {unlinked}"
    assert "tests/README.md" in targets


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for page in PAGES:
        for line in prose_lines(page.read_text(encoding="utf-8")):
            for m in _LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):  # https:, mailto:: not ours to check (and no network here)
                    continue
                file, _, anchor = target.partition("#")
                dest = (page.parent / file).resolve() if file else page
                if not dest.exists():
                    broken.append(f"{page.relative_to(ROOT)}: {target}: no such file")
                elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                    broken.append(f"{page.relative_to(ROOT)}: {target}: no such heading")
    assert broken == [], "\n".join(broken)
