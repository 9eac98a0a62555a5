"""Widgets keep no timer of their own: a timer is a wake-up of the process of its own, each second, for as long as
the console is open (the throughput panel's own timer was one of three the console ran). What a widget shows by the
clock, the screen's one tick asks of it (`ThroughputPanel.age`). Read in the source, with `ast`: a timer started
in any widget, now or later, is named here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMERS = {"set_interval", "set_timer", "call_later", "call_at", "sleep"}


def timers_started(source: str) -> list[str]:
    """`name:line` of each call of a timer's method or of a sleep, whatever it is called on."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in TIMERS:
                found.append(f"{name}:{node.lineno}")
    return found


def test_the_rule_sees_a_timer_however_it_is_written() -> None:
    assert timers_started("self.set_interval(1.0, self.tick)\n") == ["set_interval:1"]
    assert timers_started("import asyncio\nasync def f():\n    await asyncio.sleep(1)\n") == ["sleep:3"]
    assert timers_started("loop.call_later(0.1, f)\nx = self.interval\n") == ["call_later:1"]


def test_no_widget_starts_a_timer() -> None:
    found = {str(p.relative_to(ROOT)): t for p in sorted((ROOT / "widgets").rglob("*.py"))
             if (t := timers_started(p.read_text(encoding="utf-8")))}
    assert found == {}, f"widgets with timers of their own (the screen's tick should drive them): {found}"


#: the screens' timers that stay, each with why: nothing else in `screens/` may start one
SCREEN_TIMERS = {
    # a sweep's results are written by another process (`bringup sweep`): the view polls their directory, and
    # pauses the poll while it is closed (`on_screen_suspend`)
    "tui/screens/sweep.py": ["set_interval"],
}


def test_no_screen_starts_a_timer_of_its_own() -> None:
    """The overview follows the console's one tick (`ConsoleApp._tick`): its own timer woke the process every
    second, hidden or not."""
    found = {str(p.relative_to(ROOT)): [t.split(":")[0] for t in timers]
             for p in sorted((ROOT / "tui" / "screens").rglob("*.py"))
             if (timers := timers_started(p.read_text(encoding="utf-8")))}
    assert found == SCREEN_TIMERS, f"screens with timers of their own (the console's tick should drive them): {found}"
