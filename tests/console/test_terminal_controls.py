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
from pathlib import Path

import pytest

from tests.helpers.console_app import screen_text
from tests.helpers.hostile_text import (
    assert_clean_text,
    nasty_log,
)
from tests.helpers.pilot import settled
from tests.helpers.simdeploy import settings_for
from tui.console.control import ControlConsoleApp
from tui.console.messages import EngineUpdated
from tui.engine.updates import LogsRead
from tui.lifecycle.lines import line_kinds
from tui.model import LogLine
from widgets.error_log import ErrorLog

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
        painted = screen_text(app)
        assert "Load weight end." in painted
        assert_clean_text(painted)
