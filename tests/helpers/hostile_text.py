"""What a hostile server prints to reach the terminal (issue 47): C1 controls, OSC 52 (the clipboard), a
right-to-left override, and the check that none of it is left in text or bytes shown."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from tui.lifecycle.lines import KEPT_FORMAT

C1_CSI = "\u009b2J"  # the UTF-8 bytes c2 9b: clears the screen (VTE)
C1_OSC = "\u009d0;pwned\u009c"  # sets the window title, ST as U+009C
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # writes `rm -rf ~` to the clipboard
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
