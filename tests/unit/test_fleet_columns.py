"""The overview's columns give way in order at narrow widths, the note keeping its room (widgets/fleet.py
`Columns`), and a count says its noun in the right number (tui/words.py). The overview and its toasts drawn at
each size: tests/console/test_console_sizes.py."""

from __future__ import annotations

from tests.helpers.fleet_states import NOW, ROWS
from tui.model import Phase
from widgets.fleet import Columns
from widgets.fleet_rows import FleetRow


def test_columns_give_way_in_order_and_the_note_keeps_its_room() -> None:
    full = Columns.fit(ROWS, 200)
    assert full.gap == 2 and all((full.age, full.util, full.mem, full.tps, full.failure))
    assert full.phase == len("graph-capture") and full.failure == len("cuda-graph")  # as wide as their cells
    narrow = Columns.fit(ROWS, 76)  # 80 columns, less the border and padding
    assert narrow.note >= 22 and narrow.util == 0 and narrow.tps and narrow.failure and narrow.host
    tiny = Columns.fit(ROWS, 50)
    assert tiny.note >= 22 and tiny.name and tiny.phase and not tiny.tps
    # a column nothing fills goes before one with figures
    idle = [FleetRow(r.name, r.host, Phase.STOPPED, since=NOW - 5, note=r.note) for r in ROWS]
    cols = Columns.fit(idle, 76)
    assert cols.age and not (cols.failure or cols.mem or cols.util or cols.tps), cols


def test_a_count_says_its_noun_in_the_right_number() -> None:
    from tui.words import noun, plural

    assert plural(1, "configuration") == "1 configuration" and plural(0, "configuration") == "0 configurations"
    assert plural(3, "warmup request") == "3 warmup requests" and plural(1, "pending flag change") == \
        "1 pending flag change"
    assert plural(2, "entry", "entries") == "2 entries" and plural(1234, "line") == "1,234 lines"
    assert noun(1, "pid") == "pid" and noun(2, "pid") == "pids"
