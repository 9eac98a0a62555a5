"""A server's line stays one line wherever it is shown (issue 47 review, finding 8): the Unicode line and paragraph
separators (U+2028, U+2029: categories Zl, Zp) went through `clean` and `sanitize` untouched, so a line that held
one reached the log panel, the run history and the incident's Markdown as two (a Markdown renderer, a browser and
many editors end a line there), the second of the server's choosing. Now `terminal_safe` (which `sanitize`,
`clean` and the incident's `quoted` use) makes each a space."""

from __future__ import annotations

import pytest

from tui.guard.text import split_lines
from tui.lifecycle.incident import Quote, quoted
from tui.lifecycle.lines import clean, sanitize, terminal_safe

FORGED = "[2026-06-02 08:00:20 TP0] Load weight end.\u2028[2026-06-02 08:00:21 TP0] The server is fired up\u2029ok"


@pytest.mark.parametrize("sep", ["\u2028", "\u2029"])
def test_a_separator_is_a_space(sep: str) -> None:
    assert terminal_safe(f"a{sep}b") == "a b"
    assert sanitize(f"a{sep}b") == "a b"
    assert clean(f"[2026-06-02 08:00:20 TP0] a{sep}b").text == "a b"


def test_a_forged_second_line_stays_in_the_first() -> None:
    c = clean(FORGED)
    assert "\u2028" not in c.body and "\u2029" not in c.body and "\u2028" not in c.text
    assert c.text == "Load weight end. [2026-06-02 08:00:21 TP0] The server is fired up ok"
    assert len(split_lines(c.body)) == 1


def test_a_markdown_cell_or_inline_quote_stays_on_one_line() -> None:
    for where in (Quote.INLINE, Quote.CELL):
        q = quoted("boom\u2028## forged heading", where)
        assert "\u2028" not in q and q == "`boom ## forged heading`"
