"""`bringup replay` as a user runs it, a process of its own, over the real public logs of tests/fixtures/logs: the
JSON and the text it prints, its exit status, and its one-line errors (a missing, binary, unrecognised or empty
file). What replay concludes of each log, as a function: tests/unit/test_replay_fixtures.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=slack(60))


def test_cli_replay_json() -> None:
    p = _cli("replay", str(LOGS / "sglang_warmup_fail_502.log"), "--json")
    assert p.returncode == 1, "a failed replay exits 1"
    d = json.loads(p.stdout)
    assert {"final", "phases", "failure"} <= set(d)
    assert d["final"] == "failed"
    assert d["failure"]["kind"] == "warmup"
    assert [x["phase"] for x in d["phases"]][-1] == "failed"


def test_cli_replay_json_not_failed_exits_0() -> None:
    p = _cli("replay", str(LOGS / "sglang_tp8_capture_in_progress.log"), "--json")
    assert p.returncode == 0
    d = json.loads(p.stdout)
    assert d["final"] == "graph-capture"
    assert d["failure"] is None


def test_cli_replay_missing_file_exits_2_with_one_line() -> None:
    p = _cli("replay", "/nonexistent")
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert "/nonexistent" in err[0]
    assert "Traceback" not in p.stderr


def test_cli_replay_odd_files(tmp_path: Path) -> None:
    """Binary garbage is refused in one line; a 5 MB single line is read (cut) and replayed."""
    f = tmp_path / "odd.log"
    f.write_bytes(os.urandom(200_000) + b"\n\x00\xff" * 1000)
    p = _cli("replay", str(f), "--json")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "binary" in p.stderr
    f.write_bytes(b"[2026-06-02 08:00:20 TP0] Load weight begin. " + b"x" * 5_000_000)
    p = _cli("replay", str(f), "--json")
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr
    assert json.loads(p.stdout)["final"] == "loading"


def test_replay_text_labels_its_columns() -> None:
    p = _cli("replay", str(LOGS / "sglang_tp8_capture_in_progress.log"))
    lines = p.stdout.splitlines()
    assert lines[1].split() == ["PHASE", "BEGAN", "LASTED"], p.stdout
    assert lines[2].split()[0] == "starting" and lines[2].split()[1].startswith("+"), p.stdout


@pytest.mark.parametrize("kind", ["missing", "binary", "unrecognised", "empty"])
def test_cli_replay_json_errors_are_json_on_stdout(kind: str, tmp_path: Path) -> None:
    f = tmp_path / "x.log"
    if kind == "binary":
        f.write_bytes(b"\x00\x01\x02" * 100)
    elif kind == "unrecognised":
        f.write_text("hello\nworld\n")
    elif kind == "empty":
        f.write_text("")
    path = "/nonexistent/x.log" if kind == "missing" else str(f)
    p = _cli("replay", path, "--json")
    assert p.returncode == 2
    d = json.loads(p.stdout)
    assert set(d) == {"error", "code"} and d["code"] == 2 and d["error"]
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
