"""One definition of an error line: the engine classifies each line as its reducer reads it (with the preset's fatal
wordings) and sends the kind with the line; the errors view only shows it.

Before, the view classified every line again with rules of its own (`LogClassifier`), which ignored the preset's
fatal wordings: SGLang's `Scheduler or DataParallelController 1 terminated with -9`, logged at INFO, failed the
run but never showed among its errors. `_view_rule` below is that old rule, kept as the reference: on every fixture
log the view shows what it showed, and the fatal lines (with what carries on their block) besides.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.reducer_events import FATAL_AT_INFO
from tui.lifecycle.presets import get_preset
from tui.lifecycle.reducer import initial, reduce_classified
from tui.model import LogLine


async def test_the_errors_view_shows_a_fatal_line_the_engine_classified(tmp_path: Path) -> None:
    """The view shows what the engine says: the fatal line at INFO is among the errors, the lines around it not."""
    from tests.helpers.simdeploy import settings_for
    from tui.console.control import ControlConsoleApp
    from tui.console.messages import EngineUpdated
    from tui.engine.updates import LogsRead
    from widgets.error_log import ErrorLog

    texts = ["[2026-11-29 10:00:04] Load weight end.", FATAL_AT_INFO, "[2026-11-29 10:00:06] Decode batch"]
    lines = [LogLine(at=float(i), text=t) for i, t in enumerate(texts)]
    _, kinds = reduce_classified(initial(), lines, get_preset("sglang"))
    app = ControlConsoleApp(settings_for(tmp_path), "sim", live=False)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ErrorLog)
        app.post_message(EngineUpdated(LogsRead(tuple(lines), kinds)))
        for _ in range(100):  # until the batch is drawn (the app takes the message on its own loop)
            if log.matching():
                break
            await pilot.pause(0.05)
        assert log.matching() == [FATAL_AT_INFO]
