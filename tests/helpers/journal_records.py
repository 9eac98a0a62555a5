"""The real journal record the long-entry tests read (tests/fixtures/journal/, its source on its first line): a 20 KB
red "Scheduler hit an exception" line that journald sent as an 81 KB array of byte values."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "journal" / "longline_esc_bytes_array.jsonl"
WORDS = "Scheduler hit an exception"


def fixture_records() -> list[str]:
    lines = FIXTURE.read_text().splitlines()
    assert lines[0].startswith("# source: ")
    return lines[1:]


def the_long_record() -> str:
    return next(ln for ln in fixture_records() if '"MESSAGE":[' in ln)
