"""Which log lines are errors, as the log view keeps them (widgets/log.py's kinds): a fatal wording logged at INFO is
an error line, a block goes on across batches, the kinds go with their lines, the errors-only view keeps what it
showed. The view in the console: tests/console/test_error_log_kinds.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.reducer_events import FATAL_AT_INFO
from tui.lifecycle.lines import (
    TROUBLE_WORDS,
    LineKind,
    clean,
    continues_block,
    is_error_line,
    is_warning_line,
    line_kinds,
    sanitize,
)
from tui.lifecycle.presets import get_preset
from tui.lifecycle.reducer import initial, reduce_classified, reduce_lines
from tui.lifecycle.replay import events_from_lines
from tui.model import LogLine

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


EXPECTED: dict[str, dict] = json.loads((LOGS / "expected.json").read_text(encoding="utf-8"))


def _view_rule(texts: list[str]) -> list[bool]:
    """The errors view's own classification as it was (widgets/error_log.py's `LogClassifier`)."""
    shown, in_block = [], False
    for text in texts:
        raw = sanitize(text)
        if not in_block and not any(w in raw for w in TROUBLE_WORDS):
            shown.append(False)
            continue
        c = clean(raw)
        if is_error_line(c) or is_warning_line(c):
            in_block = True
        elif not (in_block and continues_block(c)):
            in_block = False
        shown.append(in_block)
    return shown


def _fixture_lines(name: str) -> list[LogLine]:
    text = (LOGS / name).read_text(encoding="utf-8").splitlines()
    return [ev for ev in events_from_lines(text) if isinstance(ev, LogLine)]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_view_shows_what_it_showed_and_the_fatal_lines_besides(name: str) -> None:
    preset = get_preset(EXPECTED[name]["preset"])
    lines = _fixture_lines(name)
    texts = [ln.text for ln in lines]
    before = _view_rule(texts)
    assert [k is not LineKind.PLAIN for k in line_kinds(texts)] == before  # without fatal wordings: the old rule
    state, kinds = reduce_classified(initial(), lines, preset)
    assert state == reduce_lines(initial(), lines, preset)  # classifying changes nothing of the reduction
    now = [k is not LineKind.PLAIN for k in kinds]
    assert all(n for n, b in zip(now, before, strict=True) if b)  # nothing shown before is hidden now
    for i, (n, b) in enumerate(zip(now, before, strict=True)):
        if n and not b:  # newly shown: a fatal line, or a line carrying on the block one opened
            assert (kinds[i] is LineKind.ERROR and preset.fatal.search(clean(texts[i]).text)) or (
                kinds[i] is LineKind.CONTINUATION and now[i - 1]), texts[i]


def test_a_fatal_wording_logged_at_info_is_an_error_line() -> None:
    sglang = get_preset("sglang")
    texts = ["[2026-11-29 10:00:04] Load weight end.", FATAL_AT_INFO, "[2026-11-29 10:00:06] Decode batch"]
    assert _view_rule(texts) == [False, False, False]  # the view's own rule never showed it
    assert line_kinds(texts, sglang.fatal) == (LineKind.PLAIN, LineKind.ERROR, LineKind.PLAIN)
    lines = [LogLine(at=float(i), text=t) for i, t in enumerate(texts)]
    assert reduce_classified(initial(), lines, sglang)[1] == (LineKind.PLAIN, LineKind.ERROR, LineKind.PLAIN)


def test_a_block_goes_on_across_batches() -> None:
    """The engine classifies batch by batch: a traceback split between two carries on from the kind before."""
    sglang = get_preset("sglang")
    first = [LogLine(at=1.0, text="[2026-11-29 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent "
                                  "call last):")]
    second = [LogLine(at=2.0, text="the message, carried on"), LogLine(at=3.0, text="ValueError: x"),
              LogLine(at=4.0, text="[2026-11-29 10:00:06 TP0] Load weight end.")]
    s, kinds = reduce_classified(initial(), first, sglang)
    assert kinds == (LineKind.ERROR,)
    assert reduce_classified(s, second, sglang)[1][0] is LineKind.PLAIN  # alone, the bare line is nothing
    _, kinds = reduce_classified(s, second, sglang, after=kinds[-1])
    assert kinds == (LineKind.CONTINUATION, LineKind.ERROR, LineKind.PLAIN)


def test_the_kinds_go_with_their_lines() -> None:
    from tui.engine.updates import LogsRead

    with pytest.raises(ValueError, match="2 lines with 1 kinds"):
        LogsRead((LogLine(at=1.0, text="a"), LogLine(at=2.0, text="b")), (LineKind.PLAIN,))
