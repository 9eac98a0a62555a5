"""How a release's parser refuses a command line: its program name (`prog`) and argparse's words with it.

argparse ends a refused command line with `%(prog)s: error: %(message)s` (Lib/argparse.py `error()`), so what the
server prints depends on the release's parser construction: SGLang 0.5.17+ builds `ArgumentParser(prog="sglang
serve")` (earlier ones leave argparse's default, argv[0]'s file name: None here); vLLM's `serve` is a subparser of
the `vllm` console script's parser, whose program is the parent's and the command's name (`vllm serve`), and an
unknown flag is reported by the top parser (`vllm: error: unrecognized arguments: ...`: the subparser hands what it
does not know back up). The message wordings are argparse's own (the same in Python 3.9-3.14); the facts record
them rendered with each release's programs, so a preset's refusal rule is checked against every release's words.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

#: argparse's refusal messages, as `str.format` templates (`{}`: argparse's own field), by the parser that says
#: them: "serve" (the serve parser itself) or "top" (the parser `parse_args` was called on: unrecognized arguments)
ARGPARSE_REFUSALS: tuple[tuple[str, str], ...] = (
    ("top", "unrecognized arguments: {}"),
    ("serve", "ambiguous option: {} could match {}"),
    ("serve", "argument {}: invalid {} value: {}"),
    ("serve", "argument {}: invalid choice: {} (choose from {})"),
    ("serve", "argument {}: expected one argument"),
    ("serve", "argument {}: {}"),  # an ArgumentTypeError's or ArgumentError's own message
    ("serve", "the following arguments are required: {}"),
)

#: the console script whose parser `vllm serve` hangs under (`vllm = vllm.entrypoints.cli.main:main`, every
#: release with a `serve` subcommand); its parser is built without `prog`, so argparse names it after argv[0]
VLLM_SCRIPT = "vllm"


@dataclass
class Refusal:
    """The programs of a release's serve command line and its refusal wordings."""

    prog: str | None = None  # the serve parser's program; None: argparse's default (argv[0]'s file name)
    top_prog: str | None = None  # the parser that reports unrecognized arguments (the serve parser's own if alone)
    error_override: str = ""  # path:line of the parser class's own `error()` (it may add words after argparse's)
    wordings: list[str] = field(default_factory=list)

    def as_facts(self) -> dict[str, Any]:
        return {"prog": self.prog, "top_prog": self.top_prog, "error_override": self.error_override,
                "refusals": self.wordings}


def refusal(prog: str | None, top_prog: str | None, error_override: str = "") -> Refusal:
    """The refusal lines of a parser whose program is `prog` under a top parser `top_prog`, as templates (a None
    program is a field too: any program)."""
    out = Refusal(prog, top_prog, error_override)
    for who, message in ARGPARSE_REFUSALS:
        name = top_prog if who == "top" else prog
        head = "{}" if name is None else name.replace("{", "{{").replace("}", "}}")
        out.wordings.append(f"{head}: error: {message}")
    return out


def subparser_prog(parent_prog: str | None, name: Any, kwargs: dict[str, Any]) -> str | None:
    """argparse's `add_parser`: an explicit `prog=`, else the parent's program, a space, the command's name."""
    given = kwargs.get("prog")
    if isinstance(given, str):
        return given
    if parent_prog is None or not isinstance(name, str):
        return None
    return f"{parent_prog} {name}"


def explicit_prog(kwargs: dict[str, Any]) -> str | None:
    given = kwargs.get("prog")
    return given if isinstance(given, str) else None


def top_prog_of(tree: ast.Module | None, default: str) -> str:
    """The program of the console script's own parser: a `prog=` literal given to a parser built in its main
    module, else argparse's default (the script's name, `default`)."""
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")).endswith(
                "ArgumentParser"):
            for kw in node.keywords:
                if kw.arg == "prog" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    return kw.value.value
    return default


__all__ = ["ARGPARSE_REFUSALS", "VLLM_SCRIPT", "Refusal", "explicit_prog", "refusal", "subparser_prog",
           "top_prog_of"]
