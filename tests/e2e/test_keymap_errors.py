"""`[ui] keys` in a config: a typo in an action's name or a key two actions would share is said in one line, and the
console (a process of its own) does not start; a good remap is taken. The keys in the console: tests/console/
test_console_keys.py."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.wait import slack


def test_a_keymap_with_an_unknown_action_or_a_clash_is_one_line_before_the_console_starts(tmp_path: Path) -> None:
    """`[ui] keys`: a typo in an action's name, or a key that two actions would share (one of them, restart
    say, left with no key at all), is said in one line and the console does not start; a good remap is taken."""
    import subprocess
    import sys

    from tui.console.keys import keymap_problem
    from tui.console.screen import ControlConsoleScreen
    from tui.screens.fleet import FleetScreen

    scopes = (ControlConsoleScreen, FleetScreen)
    assert keymap_problem(scopes, {"restart": "R", "fleet.sort_name": "n"}) == ""
    typo = keymap_problem(scopes, {"restrat": "R"})
    assert typo.startswith("[ui] keys: no action 'restrat' (did you mean 'restart'?)"), typo
    clash = keymap_problem(scopes, {"flags": "r"})
    assert clash == "[ui] keys: 'r' is the key of both restart (its default) and flags: give one of them another " \
                    "key", clash
    assert keymap_problem(scopes, {"flags": "r", "restart": "R"}) == ""  # moved out of the way: no clash

    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nkeys = { restrat = "R", flags = "r" }\n')
    r = subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), "console", "demo"], capture_output=True,
                       text=True, timeout=slack(60), stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "[ui] keys: no action 'restrat'" in r.stderr, r
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
