"""The console tests' shared fixtures: every notification an app shows is recorded (tests/helpers/console_app.py
`shown`), so that a test reads what the console said through Textual's public `App.notify`, never its private
notification store."""

from __future__ import annotations

import pytest

from tests.helpers.console_app import record_shown_notifications


@pytest.fixture(autouse=True)
def shown_notifications(monkeypatch: pytest.MonkeyPatch) -> None:
    record_shown_notifications(monkeypatch)
