"""A server's text never reaches the terminal with its control and format characters (tui/guard/text.py): stripped,
ordinary text kept whole, the rule being Unicode's Cc, Cf and surrogates but tab, newline, ZWJ and ZWNJ, and what an
excerpt shows safe. On the console's screen: tests/console/test_terminal_controls.py."""

from __future__ import annotations

import unicodedata

import pytest

from tests.helpers.hostile_text import (
    C1_CSI,
    C1_OSC,
    OSC52,
    RLO,
    assert_clean_text,
)
from tui.lifecycle.lines import KEPT_FORMAT, clean, sanitize, terminal_safe


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (f"before {OSC52}after", "before after"),
        (f"a{C1_CSI}b", "ab"),
        (f"title{C1_OSC} kept", "title kept"),
        ("\u0090DCS string\u009c dcs gone", " dcs gone"),
        ("\u009f APC\u009c\u009e PM\u009c\u0098 SOS\u009c end", " end"),
        ("\x1bP1$r q\x1b\\7-bit DCS", "7-bit DCS"),
        ("\x1bc reset \x1b(B charset \x1b7 saved", " reset  charset  saved"),
        ("lone C1 \u0085 \u0080\u009f", "lone C1  "),
        (f"evil{RLO}txt.exe", "eviltxt.exe"),
        ("iso\u2066late\u2069 mark\u200e\u200f\u061c", "isolate mark"),
        ("zw\u200bsp so\u00adft \ufeffbom tag\U000e0041", "zwsp soft bom tag"),
        ("lone surrogate \ud800!", "lone surrogate !"),
    ],
)
def test_controls_and_format_characters_are_stripped(raw: str, expected: str) -> None:
    assert terminal_safe(raw) == expected
    assert sanitize(raw) == expected


@pytest.mark.parametrize("text", [
    "中文日志：模型加载完成", "café naïve Ωμέγα", "emoji 👩\u200d💻 and 🏳\ufe0f\u200d🌈 flags 🇫🇷",
    "فارسی می\u200cخواهم", "no-break\u00a0space, thin\u2009space", "tab\tkept", "[bold]markup[/] is data",
])
def test_ordinary_text_is_kept_whole(text: str) -> None:
    assert terminal_safe(text) == text


def test_the_rule_is_unicodes_cc_cf_and_surrogates_but_tab_newline_zwj_zwnj() -> None:
    """Held to the running Python's Unicode database: every Cc and Cf character but the kept ones is stripped, and
    every other assigned character is kept (an unassigned one may go either way)."""
    cc_cf = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ("Cc", "Cf")]
    kept = {"\t", "\n", *KEPT_FORMAT}
    # one at a time: an ESC or C1 introducer would also take the characters after it
    assert [ch for ch in cc_cf if terminal_safe(ch) != ("" if ch not in kept else ch)] == []
    others = "".join(chr(c) for c in range(0x110000)
                     if unicodedata.category(chr(c)) not in ("Cc", "Cf", "Cs", "Cn", "Zl", "Zp"))
    assert terminal_safe(others) == others
    # the line and paragraph separators are a space: one server line stays one line wherever it is shown
    zl_zp = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ("Zl", "Zp")]
    assert zl_zp and [ch for ch in zl_zp if terminal_safe(f"a{ch}b") != "a b"] == []


def test_clean_and_the_body_an_excerpt_shows_are_safe() -> None:
    c = clean(f"[2026-06-02 08:00:20 TP0] {RLO}Scheduler hit an exception{C1_CSI}: {OSC52}boom")
    assert c.prefixed and c.text == "Scheduler hit an exception: boom"
    assert_clean_text(c.body)
