"""A long journal entry is never lost (issue 29, item 7).

One ESC byte makes journald send MESSAGE as an array of byte values, about four times the text: a 20 KB red
"Scheduler hit an exception" line became an 81 KB JSON line, which the transports cut at 64 KiB; it failed to parse,
was dropped, and `wait` timed out in loading instead of reporting the failure. Now the transports deliver a line of
up to 4 MiB whole (`StreamLines`), a record cut beyond that is still a record that says it was cut
(`journal.parse_record`), and MESSAGE is cut after parsing, with a marker (`journal.MAX_MESSAGE`).

The fixture is a real record (tests/fixtures/journal/, its source on its first line); the live tests write such an
entry into the test host's journal (a transient unit, `systemd-run`) and read it back over SSH, as the console
follows a unit (skipped when the test host is not up, unless BRINGUP_TESTHOST=required).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.test_ssh_faults import HostInfo, host_status
from tui.lifecycle.journal import MAX_MESSAGE, MAX_RECORD, parse_entry, parse_record
from tui.lifecycle.replay import events_from_lines, replay
from tui.managers.systemd import SystemdManager
from tui.model import LogLine, Phase, UnitState
from tui.transport.lines import LineSplitter
from tui.transport.local import STREAM_MAX_LINE, LocalTransport, StreamLines
from tui.transport.ssh import SshTransport

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "journal" / "longline_esc_bytes_array.jsonl"
WORDS = "Scheduler hit an exception"


def fixture_records() -> list[str]:
    lines = FIXTURE.read_text().splitlines()
    assert lines[0].startswith("# source: ")
    return lines[1:]


def the_long_record() -> str:
    return next(ln for ln in fixture_records() if '"MESSAGE":[' in ln)


# ---------------------------------------------------------------------------------------------- the parser


def test_the_real_record_is_longer_than_the_old_bound_and_parses_whole() -> None:
    raw = the_long_record()
    assert len(raw) > 65_536  # what the transports used to cut a line at
    obj = parse_record(raw)
    assert obj is not None and isinstance(obj["MESSAGE"], list)
    e = parse_entry(obj)
    assert WORDS in e.text and e.text.startswith("\x1b[31m[2026-06-02 08:00:20 TP0]") and len(e.text) == 20_063
    assert e.invocation and e.cursor and e.at is not None and not e.cut


def test_a_record_cut_at_the_old_bound_is_kept_and_says_so() -> None:
    """What a 64 KiB reader delivered: the beginning of the record. It is a record still, with the part of MESSAGE
    that arrived (the failure's words) and a marker, not a line silently dropped."""
    raw = the_long_record()[:65_536]
    obj = parse_record(raw)
    assert obj is not None
    e = parse_entry(obj)
    assert WORDS in e.text and e.cut
    assert e.text.endswith("…[a journal entry of more than 65,536 bytes was cut]"), e.text[-80:]


def test_a_replay_of_the_cut_record_still_reports_the_failure() -> None:
    """The reported bug: the entry that says the server failed must reach the reducer, cut or not."""
    records = fixture_records()
    whole = replay(records, "sglang")
    cut = replay([r[:65_536] for r in records], "sglang")
    for r in (whole, cut):
        assert r.state.phase == Phase.FAILED and r.state.failure is not None
        assert any(WORDS in x for x in r.state.failure.excerpt)


def test_a_cut_record_keeps_what_identifies_it_and_its_message_as_far_as_it_came() -> None:
    msg = ("\x1b[31m" + WORDS + ": " + "y" * (2 * MAX_RECORD)).encode()
    rec = json.dumps({"__CURSOR": "s=abc;i=1", "__REALTIME_TIMESTAMP": "1780000000000000",
                      "_SYSTEMD_INVOCATION_ID": "0123456789abcdef0123456789abcdef", "_PID": "4242",
                      "MESSAGE": list(msg)}, separators=(",", ":"))
    obj = parse_record(rec[:MAX_RECORD])
    assert obj is not None
    e = parse_entry(obj)
    assert (e.cursor, e.invocation, e.at) == ("s=abc;i=1", "0123456789abcdef0123456789abcdef", 1_780_000_000.0)
    assert e.text.startswith("\x1b[31m" + WORDS) and e.cut and "was cut]" in e.text
    assert len(e.text) < MAX_MESSAGE + 200  # cut to the bound of a line as well


def test_a_cut_record_whose_message_did_not_arrive_is_a_synthetic_line() -> None:
    rec = '{"__CURSOR":"s=1","_SYSTEMD_INVOCATION_ID":"ab","OTHER":"' + "z" * 100
    e = parse_entry(parse_record(rec) or {})
    assert e.cursor == "s=1" and e.invocation == "ab"
    assert e.text == f"…[a journal entry of more than {len(rec):,} bytes was cut]" and e.cut


def test_a_long_message_is_cut_after_parsing_with_a_marker() -> None:
    e = parse_entry({"MESSAGE": WORDS + "x" * (3 * MAX_MESSAGE), "__CURSOR": "c"})
    assert e.text.startswith(WORDS) and e.cut
    assert e.text.endswith(f" …[{len(WORDS) + 2 * MAX_MESSAGE:,} characters of this journal entry cut]")
    assert len(e.text) < MAX_MESSAGE + 80


def test_lines_that_are_no_record_are_none() -> None:
    assert parse_record("-- No entries --") is None
    assert parse_record("[1, 2]") is None
    assert parse_record('{"not a record": ') is None  # broken JSON that names no field of a record
    assert parse_record("  " + json.dumps({"MESSAGE": "m"}) + "\r") == {"MESSAGE": "m"}


def test_replay_reads_the_fixture_as_the_console_would() -> None:
    lines = [ev for ev in events_from_lines(fixture_records()) if isinstance(ev, LogLine)]
    assert len(lines) == 1 and WORDS in lines[0].text and lines[0].invocation


# ---------------------------------------------------------------------------------------------- the line readers


def test_the_stream_reader_delivers_the_record_whole_in_ssh_sized_pieces() -> None:
    data = ("a line\r\n" + the_long_record() + "\r\nnext\r\n").encode()
    old, new = LineSplitter(), StreamLines()
    got_old: list[str] = []
    got_new: list[str] = []
    for at in range(0, len(data), 32_768):
        got_old += old.feed(data[at:at + 32_768])
        got_new += new.feed(data[at:at + 32_768])
    assert got_new == ["a line", the_long_record(), "next"]
    assert len(got_old[1]) == 65_536  # the old reader: the record cut, and its JSON broken


def test_a_4_mib_line_costs_little() -> None:
    sl = StreamLines()
    chunk = b"x" * 32_768
    t0 = time.perf_counter()
    for _ in range(STREAM_MAX_LINE // len(chunk)):
        assert sl.feed(chunk) == []
    out = sl.feed(b"\n")
    assert [len(x) for x in out] == [STREAM_MAX_LINE]
    assert time.perf_counter() - t0 < 0.5  # linear: the splitter alone rescanned its partial line every time


async def test_the_local_transport_streams_an_81_kb_record_and_a_cut_5_mib_one(tmp_path: Path) -> None:
    big = json.dumps({"__CURSOR": "s=big", "MESSAGE": list(b"\x1b[31m" + WORDS.encode() + b"y" * (5 << 20))},
                     separators=(",", ":"))
    path = tmp_path / "records.jsonl"  # a command line cannot hold 20 MB: the child prints a file
    path.write_text(the_long_record() + "\n" + big + "\n")
    argv = [sys.executable, "-c", f"import sys; sys.stdout.write(open({str(path)!r}).read())"]
    got = [ln async for ln in LocalTransport().stream(argv)]
    assert got[0] == the_long_record()
    assert len(got[1]) == STREAM_MAX_LINE
    e = parse_entry(parse_record(got[1]) or {})
    assert e.cursor == "s=big" and e.text.startswith("\x1b[31m" + WORDS) and e.cut


# ---------------------------------------------------------------------------------------------- a real journald


@pytest.fixture(scope="module")
def testhost() -> HostInfo:
    st = host_status()
    if not st:
        if os.environ.get("BRINGUP_TESTHOST") == "required":
            pytest.fail("BRINGUP_TESTHOST=required but the test host is not up (.ci/testhost.sh up)")
        pytest.skip("the systemd test host is not up (bash .ci/testhost.sh build && bash .ci/testhost.sh up)")
    port = int(st["ssh"].rsplit(":", 1)[1])
    pubs = sorted(Path(st["rootfs"], "etc", "ssh").glob("ssh_host_*_key.pub"))
    return HostInfo(port, str(ROOT / ".testhost" / "keys" / "id_ed25519"),
                    [f"[127.0.0.1]:{port} {' '.join(p.read_text().split()[:2])}" for p in pubs])


@pytest.fixture
async def host(testhost: HostInfo, tmp_path: Path) -> AsyncIterator[SshTransport]:
    kh = tmp_path / "known_hosts"
    kh.write_text("".join(ln + "\n" for ln in testhost.known_hosts))
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host testhost\n    HostName 127.0.0.1\n    Port {testhost.port}\n    User root\n"
                   f"    IdentityFile {testhost.key}\n    IdentitiesOnly yes\n    UserKnownHostsFile {kh}\n"
                   "    GlobalKnownHostsFile /dev/null\n")
    t = SshTransport("testhost", config=[str(cfg)])
    yield t
    await t.close()


@pytest.mark.slow
async def test_a_20_kb_red_line_in_a_real_journal_reaches_the_follow_whole(host: SshTransport) -> None:
    """A transient unit prints a 20 KB red traceback line and fails; `journalctl -u UNIT -o json -f` over SSH (the
    follow the console and `wait` use) delivers it, with its invocation, not a line dropped for its length."""
    unit = f"bringup-longline-{uuid.uuid4().hex[:12]}.service"
    # the process lives on a moment after its line: journald reads the metadata of a line's sender (its unit's
    # invocation among them) from the live process, and under load a sender that exits at once may be gone by then
    # (CI saw the record without _SYSTEMD_INVOCATION_ID once); a server that crashes lives on a moment too
    code = (f"import sys, time; sys.stdout.write('\\x1b[31m[2026-06-02 08:00:20 TP0] {WORDS}: ' + 'x' * 20000 + "
            "'\\x1b[0m\\n'); sys.stdout.flush(); time.sleep(2); sys.exit(1)")
    t0 = time.time()
    res = await host.run(["systemd-run", f"--unit={unit}", "--wait", "--quiet", "python3", "-c", code], timeout=60)
    try:
        assert res.rc != 0, res.error_text  # the unit failed, as the server did
        dump = await host.run(["journalctl", "-u", unit, "-o", "json", "--all", "--no-pager"], timeout=30)
        records = [parse_record(x) for x in dump.text.splitlines()]
        long = [r for r in records if r is not None and isinstance(r.get("MESSAGE"), list)]
        assert long, "journald did not send the message as an array of byte values"
        assert len(json.dumps(long[0])) > 65_536
        inv = str(long[0]["_SYSTEMD_INVOCATION_ID"])
        follow = SystemdManager(host, unit).follow(UnitState(active="failed", invocation=inv, started_at=t0))
        got: LogLine | None = None
        async with asyncio.timeout(30):
            async for line in follow:
                if line.invocation and WORDS in line.text:  # not systemd's "Started ... -c CODE"
                    got = line
                    break
        await follow.aclose()  # type: ignore[attr-defined]
        assert got is not None and got.invocation == inv and got.cursor
        assert len(got.text) == len("\x1b[31m[2026-06-02 08:00:20 TP0] ") + len(WORDS) + 2 + 20_000 + len("\x1b[0m")
    finally:
        await host.run(["systemctl", "reset-failed", unit], timeout=30)
