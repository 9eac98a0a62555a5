"""The header's title at 80 columns shortens its middle first, keeping the deployment and its last part (the mode,
the way back): widgets/header.py `fit_title`. The console drawn at 80x24: tests/console/test_console_80x24.py."""

from __future__ import annotations

from tests.helpers.console_states import SUB
from widgets.header import fit_title


def test_fit_title_shortens_the_middle_first() -> None:
    assert fit_title("bringup", "sim @ box", 60) == ("bringup", "sim @ box")
    _, sub = fit_title("bringup", SUB, 62)
    assert len(sub) <= 62 and sub.startswith("k26-dflash @ gpu-box") and sub.endswith("esc: all deployments"), sub
    _, tiny = fit_title("bringup", SUB, 30)
    assert len(tiny) <= 30 and tiny.endswith("esc: all deployments"), tiny
