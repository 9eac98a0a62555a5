"""The CLI's help says what a user needs to know: every positional and option has help, and the commands' help names
what matters (tui/cli/args.py's parser, built and read without running a command). The CLI's errors, each a
process of its own: tests/e2e/test_errors.py."""

from __future__ import annotations

import argparse


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"bringup": parser, **sub.choices}


def test_every_positional_and_option_has_help() -> None:
    from tui.cli import build_parser

    missing = [f"{cmd} {a.dest}" for cmd, p in _options(build_parser()).items() for a in p._actions
               if not a.help and not isinstance(a, argparse._SubParsersAction)]
    assert not missing, missing


def test_help_says_what_the_user_needs_to_know() -> None:
    from tui.cli import build_parser

    cmds = _options(build_parser())
    assert "--json" not in cmds["console"]._option_string_actions
    assert "--headless" in cmds["demo"]._option_string_actions["--json"].help  # --json only prints with --headless
    restart = " ".join(cmds["restart"].format_help().split())
    assert restart.count("can be repeated") == 2 and "ready_timeout_s, 1800" in restart
    assert "default: the deployment's ready_timeout_s" in " ".join(cmds["start"].format_help().split())
    for cmd in ("restart", "flags"):
        text = " ".join(cmds[cmd].format_help().split())
        assert "without the leading `--`" in text and "mem-fraction-static=0.85" in text, cmd
    wait = " ".join(cmds["wait"].format_help().split())
    assert "timeout (3) or stopped (4)" in " ".join(build_parser().format_help().split())  # the command list
    assert "stopped" in wait and "exit 3" in wait and "exit 4" in wait and "default 1800" in wait
