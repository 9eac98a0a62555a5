"""A long journal entry is never lost (issue 29, item 7), through the transports that carry it.

One ESC byte makes journald send MESSAGE as an array of byte values, about four times the text: a 20 KB red
"Scheduler hit an exception" line became an 81 KB JSON line, which the transports cut at 64 KiB; it failed to parse,
was dropped, and `wait` timed out in loading instead of reporting the failure. Now the transports deliver a line of
up to 4 MiB whole (`StreamLines`), a record cut beyond that is still a record that says it was cut
(`journal.parse_record`), and MESSAGE is cut after parsing, with a marker (`journal.MAX_MESSAGE`).

The record and its parsing, as functions: tests/unit/test_long_journal_record.py. Here the fixture's record goes
through the local transport, and the live test writes such an entry into the test host's journal (a transient unit,
`systemd-run`) and reads it back over SSH, as the console follows a unit (skipped when the test host is not up,
unless BRINGUP_TESTHOST=required).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers.journal_records import WORDS, the_long_record
from tests.helpers.wait import slack
from tui.lifecycle.journal import parse_entry, parse_record
from tui.managers.systemd import SystemdManager
from tui.model import LogLine, UnitState
from tui.transport.local import STREAM_MAX_LINE, LocalTransport
from tui.transport.ssh import SshTransport

# ---------------------------------------------------------------------------------------------- the line readers


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


@pytest.mark.slow
async def test_a_20_kb_red_line_in_a_real_journal_reaches_the_follow_whole(testhost_ssh: SshTransport) -> None:
    """A transient unit prints a 20 KB red traceback line and fails; `journalctl -u UNIT -o json -f` over SSH (the
    follow the console and `wait` use) delivers it, with its invocation, not a line dropped for its length."""
    unit = f"bringup-longline-{uuid.uuid4().hex[:12]}.service"
    # the process lives on a moment after its line: journald reads the metadata of a line's sender (its unit's
    # invocation among them) from the live process, and under load a sender that exits at once may be gone by then
    # (CI saw the record without _SYSTEMD_INVOCATION_ID once); a server that crashes lives on a moment too
    code = (f"import sys, time; sys.stdout.write('\\x1b[31m[2026-06-02 08:00:20 TP0] {WORDS}: ' + 'x' * 20000 + "
            "'\\x1b[0m\\n'); sys.stdout.flush(); time.sleep(2); sys.exit(1)")
    t0 = time.time()
    res = await testhost_ssh.run(["systemd-run", f"--unit={unit}", "--wait", "--quiet", "python3", "-c", code],
                                 timeout=slack(60))
    try:
        assert res.rc != 0, res.error_text  # the unit failed, as the server did
        dump = await testhost_ssh.run(["journalctl", "-u", unit, "-o", "json", "--all", "--no-pager"],
                                      timeout=slack(30))
        records = [parse_record(x) for x in dump.text.splitlines()]
        long = [r for r in records if r is not None and isinstance(r.get("MESSAGE"), list)]
        assert long, "journald did not send the message as an array of byte values"
        assert len(json.dumps(long[0])) > 65_536
        inv = str(long[0]["_SYSTEMD_INVOCATION_ID"])
        follow = SystemdManager(testhost_ssh, unit).follow(UnitState(active="failed", invocation=inv, started_at=t0))
        got: LogLine | None = None
        async with asyncio.timeout(slack(30)):
            async for line in follow:
                if line.invocation and WORDS in line.text:  # not systemd's "Started ... -c CODE"
                    got = line
                    break
        await follow.aclose()  # type: ignore[attr-defined]
        assert got is not None and got.invocation == inv and got.cursor
        assert len(got.text) == len("\x1b[31m[2026-06-02 08:00:20 TP0] ") + len(WORDS) + 2 + 20_000 + len("\x1b[0m")
    finally:
        await testhost_ssh.run(["systemctl", "reset-failed", unit], timeout=slack(30))
