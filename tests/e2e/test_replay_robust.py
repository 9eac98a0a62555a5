"""`bringup replay` of hostile or odd logs (issue 29.12): a JSON line nested deeper than Python's parser goes is read
as text (it used to end in "internal error: RecursionError"), one stray NUL no longer makes a log "a binary file"
while real binary files are still refused, and a large log replays in bounded memory (it used to be read whole:
812 MB for a 176 MB log). Through the real command line, as a user runs it."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.wait import slack
from tui.lifecycle.replay import binary_kind, replay

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "fixtures" / "logs" / "sglang_eagle3_decode_accept_len.log"
DECODE = ("[2025-10-22 10:{m:02d}:{s:02d} TP0] Decode batch. #running-req: 1, #token: {n}, token usage: 0.00, "
          "accept len: 1.80, accept rate: 0.45, cuda graph: True, gen throughput (token/s): 165.41, #queue-req: 0, \n")


def run_replay(tmp_path: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "tui", "replay", *args], input=stdin, capture_output=True, cwd=ROOT,
                       env=env, timeout=slack(120))
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


def final(r: subprocess.CompletedProcess[str]) -> str:
    return json.loads(r.stdout)["final"]


def test_a_deeply_nested_json_line_is_read_as_text(tmp_path: Path) -> None:
    lines = LOG.read_text().splitlines()
    deep = '{"MESSAGE": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001
    log = tmp_path / "deep.log"
    log.write_text("\n".join([lines[0], deep, *lines[1:], "[" * 200_000]) + "\n")
    r = run_replay(tmp_path, str(log), "--json")
    assert r.returncode == 0 and "internal error" not in r.stderr, r
    assert final(r) == final(run_replay(tmp_path, str(LOG), "--json"))
    assert replay([deep]).state.phase is not None  # the function alone, too


def test_one_stray_nul_is_still_a_log_and_binary_files_are_refused(tmp_path: Path) -> None:
    text = LOG.read_bytes()
    stray = tmp_path / "stray.log"
    stray.write_bytes(text[:200] + b"\x00" + text[200:])
    r = run_replay(tmp_path, str(stray), "--json")
    assert r.returncode == 0, r
    assert final(r) == "ready"
    assert binary_kind(text[:8192]) is None and binary_kind(b"") is None
    noise = bytes(range(256)) * 32
    for blob, words in ((gzip.compress(text), "zcat"), (b"LPKSHHRH" + b"\x00" * 300, "journalctl --file"),
                        (noise, "binary"), (b"\x7fELF" + text, "binary")):
        path = tmp_path / "blob"
        path.write_bytes(blob)
        for args, stdin in (([str(path)], None), (["-"], blob)):
            r = run_replay(tmp_path, *args, stdin=stdin)
            assert r.returncode == 2 and r.stdout == "" and words in r.stderr and "binary" in r.stderr, r


@pytest.mark.slow
def test_a_large_log_replays_in_bounded_memory(tmp_path: Path) -> None:
    """A 40 MB log (a real start-up, then 200,000 decode lines): the replay's peak RSS stays under 100 MiB, where
    reading it whole took several times the file's size; from a file and from stdin."""
    log = tmp_path / "big.log"
    with open(log, "w") as f:
        f.write(LOG.read_text())
        i = 0
        while f.tell() < 40_000_000:
            f.write("".join(DECODE.format(m=30 + (i // 60) % 29, s=i % 60, n=i + k) for k in range(1000)))
            i += 1
    for how in ("file", "stdin"):
        argv = [sys.executable, "-m", "tui", "replay", str(log) if how == "file" else "-", "--json"]
        with open(log, "rb") as stdin:
            # measured by a small launcher: a child's peak RSS counts its parent's pages at the fork (pytest's)
            r = subprocess.run([sys.executable, "-c", PEAK, *argv], cwd=ROOT, capture_output=True, timeout=slack(300),
                               stdin=stdin if how == "stdin" else subprocess.DEVNULL,
                               env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, (how, r)
        out, peak = r.stdout.decode().rsplit("\n", 1)
        assert json.loads(out)["final"] == "ready"
        peak_mib = int(peak) / 1024
        print(f"{how}: peak RSS {peak_mib:.0f} MiB for {log.stat().st_size / 1e6:.0f} MB")
        assert peak_mib < 100, (how, peak_mib)


#: runs argv, passing its stdin on, and prints its output then its peak RSS (KiB)
PEAK = """
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)
sys.stdout.write(r.stdout.decode().rstrip("\\n") + "\\n" + str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(r.returncode)
"""


def test_random_bytes_are_binary_every_time() -> None:
    """26 of 256 byte values are controls: random bytes sat at ~10 %, on the old 10 % line, and half of them replayed
    as a log with no server lines (CI saw it). Any random 8 KiB is binary; a log with stray NULs is not."""
    import os

    from tui.lifecycle.replay import binary_kind

    assert all(binary_kind(os.urandom(8192)) for _ in range(300))
    log = b"[2026-06-02 08:00:20 TP0] Load weight begin. avail mem=78.12 GB\n" * 128
    assert binary_kind(log[:4000] + b"\x00" * 16 + log[4000:8192]) is None
