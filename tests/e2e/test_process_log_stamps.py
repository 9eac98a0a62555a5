"""A hostile server's stamps and line ends in a `process` run's log, read back by the real process manager over the
real local transport (issue 47.2: the supervisor writes `<epoch> <text>`; the manager reads the file with `stat`
and `dd`): a forged line end makes no line and no stamp of the server's, a stamp that is no moment drops its line.
What is recorded and written up of such text: tests/unit/test_hostile_server_text.py."""

from __future__ import annotations

import math
from pathlib import Path

from tui.managers.process import ProcessManager
from tui.transport.local import LocalTransport

T0 = 1_765_000_000.0
SEPARATORS = ("\x1c", "\x1d", "\x1e", "\x85", "\u2028")
STAMPS = ("inf", "nan", "-inf", "Infinity", "1e999")
READY = "The server is fired up and ready to roll!"


def forged_lines() -> list[str]:
    return [f"junk{sep}{stamp} {READY}" for sep in SEPARATORS for stamp in STAMPS]


def write_log(run_dir: Path, inv: str, texts: list[str]) -> None:
    (run_dir / "logs").mkdir(parents=True)
    body = "".join(f"{T0 + i:.6f} {t}\n" for i, t in enumerate(texts))
    (run_dir / "logs" / f"{inv}.log").write_text(body, encoding="utf-8")


async def test_a_forged_line_end_makes_no_line_and_no_stamp_of_the_servers(tmp_path: Path) -> None:
    inv = "a" * 32
    texts = ["starting", *forged_lines(), f"x\x1c{T0 - 86400:.6f} Load weight end. forged a day early", "the end"]
    write_log(tmp_path, inv, texts)
    mgr = ProcessManager(LocalTransport(), str(tmp_path), ["server"], {})
    lines = await mgr.read_log(inv)
    assert [ln.text for ln in lines] == texts  # one line each, as printed
    assert all(math.isfinite(ln.at) and T0 <= ln.at < T0 + len(texts) for ln in lines), [ln.at for ln in lines]


async def test_a_stamp_that_is_no_moment_drops_the_line_never_crashes(tmp_path: Path) -> None:
    inv = "b" * 32
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / f"{inv}.log").write_text(
        f"{T0:.6f} first\ninf {READY}\nnan x\n1e999 y\n0x10 z\n99999999999 far future\n{T0 + 1:.6f} last\n")
    lines = await ProcessManager(LocalTransport(), str(tmp_path), ["server"], {}).read_log(inv)
    assert [(ln.at, ln.text) for ln in lines] == [(T0, "first"), (T0 + 1, "last")]
