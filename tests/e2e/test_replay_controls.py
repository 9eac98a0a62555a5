"""`bringup replay` of a log full of control and format characters prints none of them to a pipe (a process of its
own; the rule: tests/unit/test_control_characters.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.hostile_text import (
    assert_clean_bytes,
    assert_clean_text,
    nasty_log,
)
from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]


def run_replay(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tui", "replay", *args], capture_output=True, cwd=ROOT,
                          timeout=slack(120), stdin=subprocess.DEVNULL)


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
