"""The CLI and the console refuse a contradictory change in the same words: both plan through plan_change
(tui/ops/change.py), and nothing is restarted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.helpers.console_app import console, record_notes
from tests.helpers.pilot import until
from tests.helpers.simdeploy import write_config
from tui.cli import main
from tui.lifecycle.flags import FlagChange


async def test_the_cli_and_the_console_refuse_a_contradictory_change_in_the_same_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both front ends plan through plan_change: the same refusal, word for word, and nothing restarted."""
    said = "--set tp-size=4 and --unset tp-size contradict: give one of them"
    config = write_config(tmp_path)
    rc = await asyncio.to_thread(main, ["--config", str(config), "restart", "sim", "--yes", "--set", "tp-size=4",
                                        "--unset", "tp-size"])
    assert rc == 2 and capsys.readouterr().err.strip() == f"bringup: {said}"

    app, w = console(tmp_path)  # the same deployment, in the console
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        app.confirm_restart([FlagChange("tp-size", "4"), FlagChange("tp-size", None, remove=True)])
        assert await until(pilot, lambda: bool(notes))
        assert [(n.message, n.severity) for n in notes] == [(said, "error")]
        assert not app.restarting
    await w.close()
