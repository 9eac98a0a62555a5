"""No text from a server reaches the terminal with a control in it (issue 29, item 8).

The sanitiser stripped 7-bit escape sequences and C0 controls, but C1 controls (U+0080-U+009F: VTE and xterm.js act on
them sent as UTF-8, so `\\xc2\\x9b2J` clears the screen and U+009D opens an OSC: a title, an OSC 52 clipboard write)
and format characters (Unicode Cf: bidi overrides such as U+202E reorder what the terminal shows) went through. The
one rule (`tui.lifecycle.lines.terminal_safe`, applied by `sanitize` and `clean`) strips them, keeping tab, newline,
ZWJ and ZWNJ and every ordinary character. Checked as a rule, through `bringup replay` (a real subprocess writing to
a pipe: the bytes are gone) and through the console's log view (Textual pilot).
"""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.pilot import settled
from tests.helpers.simdeploy import settings_for
from tui.app import ControlConsoleApp
from tui.engine.updates import LogsRead
from tui.lifecycle.lines import KEPT_FORMAT, clean, line_kinds, sanitize, terminal_safe
from tui.messages import EngineUpdated
from tui.model import LogLine
from widgets.error_log import ErrorLog

ROOT = Path(__file__).resolve().parents[2]

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # writes `rm -rf ~` to the clipboard
C1_CSI = "\u009b2J"  # the UTF-8 bytes c2 9b: clears the screen (VTE)
C1_OSC = "\u009d0;pwned\u009c"  # sets the window title, ST as U+009C
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
#: every byte sequence none of which may reach a terminal (UTF-8 of the C1 controls and the bidi controls included)
FORBIDDEN = [b"\x1b", b"\x07", b"\xc2\x9b", b"\xc2\x9d", b"\xc2\x9c", RLO.encode(), "\u2066".encode(),
             "\u200f".encode(), "\u061c".encode()]


def assert_clean_bytes(data: bytes) -> None:
    for bad in FORBIDDEN:
        assert bad not in data, (bad, data[max(0, data.find(bad) - 60):data.find(bad) + 60])
    for ch in data.decode("utf-8"):
        assert ch in "\t\n" or ch in KEPT_FORMAT or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"), repr(ch)


def assert_clean_text(text: str) -> None:
    assert_clean_bytes(text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------- the rule


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


# ---------------------------------------------------------------------------------------------- bringup replay


def nasty_log(path: Path) -> Path:
    """An SGLang start-up that fails, its lines carrying the controls, as text and as a JSON journal record whose
    MESSAGE is an array of byte values (how journald sends a line with ESC or C1 in it)."""
    lines = [
        f"[2026-06-02 08:00:00 TP0] Load weight begin. {OSC52}avail mem=79.00 GB",
        f"[2026-06-02 08:00:10 TP0] {C1_OSC}Load weight end. type=LlamaForCausalLM{C1_CSI}",
        f"[2026-06-02 08:00:20 TP0] Scheduler hit an exception: Traceback (most recent call last):{RLO}",
        f'  File "/sgl/scheduler.py", line 1, in run_scheduler_process {C1_CSI}',
        f"RuntimeError: CUDA out of memory{RLO}.{OSC52}",
    ]
    record = {"__CURSOR": "s=1", "__REALTIME_TIMESTAMP": "1780387230000000", "_SYSTEMD_INVOCATION_ID": "ab" * 16,
              "MESSAGE": list(f"[2026-06-02 08:00:30 TP0] {C1_CSI}Received sigquit{OSC52}\u2066".encode())}
    path.write_bytes(("\n".join(lines) + "\n" + json.dumps(record) + "\n").encode())
    return path


def run_replay(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tui", "replay", *args], capture_output=True, cwd=ROOT,
                          timeout=120, stdin=subprocess.DEVNULL)


def strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*strings(k), *strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


@pytest.mark.slow
def test_replay_prints_none_of_them_to_a_pipe(tmp_path: Path) -> None:
    log = nasty_log(tmp_path / "nasty.log")
    res = run_replay(str(log), "--preset", "sglang")
    out = res.stdout + res.stderr
    assert b"Scheduler hit an exception" in out and b"failure:" in out, out  # the failure's lines were printed
    assert_clean_bytes(out)
    res = run_replay(str(log), "--preset", "sglang", "--json")
    assert_clean_bytes(res.stdout + res.stderr)
    d = json.loads(res.stdout)
    assert d["failure"] and any("Scheduler hit an exception" in s for s in strings(d))
    for s in strings(d):  # escaped by json.dumps, but a reader of the JSON must not get them back either
        assert_clean_text(s)


# ---------------------------------------------------------------------------------------------- the console


@pytest.mark.slow
async def test_the_console_log_view_shows_none_of_them(tmp_path: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    raw = nasty_log(tmp_path / "nasty.log").read_text().splitlines()
    texts = [*raw[:-1], bytes(json.loads(raw[-1])["MESSAGE"]).decode()]  # as the journal follow delivers it
    async with app.run_test(size=(120, 36)) as pilot:
        app.post_message(EngineUpdated(LogsRead(tuple(LogLine(at=1.0, text=t) for t in texts), line_kinds(texts))))
        await settled(pilot)
        log = app.query_one(ErrorLog)
        shown_errors = list(log.log_view.lines)
        assert any("Scheduler hit an exception" in t for t in shown_errors), shown_errors
        await pilot.press("e")  # all lines
        await settled(pilot)
        shown = list(log.log_view.lines)
        assert any("Load weight end." in t for t in shown) and any("sigquit" in t for t in shown), shown
        for t in [*shown_errors, *shown]:
            assert_clean_text(t)
        painted = "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert "Load weight end." in painted
        assert_clean_text(painted)
