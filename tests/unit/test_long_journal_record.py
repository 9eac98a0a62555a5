"""A long journal entry is never lost (issue 29, item 7): the record and the lines that carry it, as functions.

One ESC byte makes journald send MESSAGE as an array of byte values, about four times the text: a 20 KB red
"Scheduler hit an exception" line became an 81 KB JSON line, which the transports cut at 64 KiB; it failed to parse,
was dropped, and `wait` timed out in loading instead of reporting the failure. Now the transports deliver a line of
up to 4 MiB whole (`StreamLines`), a record cut beyond that is still a record that says it was cut
(`journal.parse_record`), and MESSAGE is cut after parsing, with a marker (`journal.MAX_MESSAGE`).

The fixture is a real record (tests/fixtures/journal/, its source on its first line). Such a record through the
local transport and through a real journald over SSH: tests/e2e/test_long_journal_entry.py.
"""

from __future__ import annotations

import json
import time

from tests.helpers.journal_records import WORDS, fixture_records, the_long_record
from tui.lifecycle.journal import MAX_MESSAGE, MAX_RECORD, parse_entry, parse_record
from tui.lifecycle.replay import events_from_lines, replay
from tui.model import LogLine, Phase
from tui.transport.lines import LineSplitter
from tui.transport.local import STREAM_MAX_LINE, StreamLines


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
