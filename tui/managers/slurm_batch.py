"""An operator's own batch script as a Slurm deployment's command: its server line read as words, and a copy of the
script with that line rewritten for new flags (pure). The script itself is never written: the copy is what is
submitted.

The server line is the line after a `# bringup: server` comment, else the script's one line that starts with
`srun` (or `exec srun`); a line continued with a backslash is one line. Its words are read as the shell reads them
(quotes removed; `$VAR`, `${VAR}` and `$(...)` kept as text, for the shell on the node to expand). A rewrite keeps
every word bringup did not change exactly as the script writes it (its quotes, its variables), and quotes only the
words it adds or changes (`shlex.quote`): the same rule as the systemd manager's for a unit's ExecStart.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from tui.guard.text import split_lines

MARK = re.compile(r"^\s*#\s*bringup:\s*server\s*$")
_SRUN = re.compile(r"^\s*(?:exec\s+)?srun(?:\s|$)")


class BatchScriptError(ValueError):
    """The script has no server line bringup can read, or one it cannot read exactly."""


@dataclass(frozen=True, slots=True)
class Word:
    """One word of the line: as written, and as the shell passes it (quotes removed, expansions kept as text)."""

    raw: str
    value: str


@dataclass(frozen=True, slots=True)
class ServerLine:
    """The server line: the script's lines `first` to `last` (a continued line spans several), its indent and its
    words."""

    first: int
    last: int
    indent: str
    words: tuple[Word, ...]

    @property
    def argv(self) -> list[str]:
        return [w.value for w in self.words]


def _closing(text: str, i: int, opening: str, closing: str) -> int:
    """The index just past the `closing` that ends what opens at `i` (nested, quotes inside skipped); -1 for none."""
    depth, j = 0, i
    while j < len(text):
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "'" and opening != "`":
            j = text.find("'", j + 1)
            if j < 0:
                return -1
        elif ch == opening and (opening != closing or j == i):
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return -1


def split_words(text: str) -> list[Word]:
    """The shell's words of one logical line (its continuations joined): single and double quotes and backslashes
    as the shell reads them, `$(...)`, `${...}` and backquotes kept whole as text; a `#` starting a word ends the
    line. Raises BatchScriptError for an unclosed quote, or shell syntax bringup does not rewrite (`;`, `|`, `&`, a
    redirection, a subshell)."""
    words: list[Word] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] == "#":
            break
        start, value = i, []
        while i < n and text[i] not in " \t":
            ch = text[i]
            if ch in ";|&<>()":
                raise BatchScriptError(f"the server line has shell syntax bringup does not rewrite ({ch!r}): "
                                       "keep it to one command and its arguments")
            if text.startswith(("$(", "${"), i) or ch == "`":
                opening, closing = ("`", "`") if ch == "`" else (text[i + 1], ")" if text[i + 1] == "(" else "}")
                end = _closing(text, i if ch == "`" else i + 1, opening, closing)
                if end < 0:
                    raise BatchScriptError("the server line has an unclosed expansion")
                value.append(text[i:end])
                i = end
            elif ch == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise BatchScriptError("the server line has an unclosed single quote")
                value.append(text[i + 1:end])
                i = end + 1
            elif ch == '"':
                j, part = i + 1, []
                while j < n and text[j] != '"':
                    if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`':
                        part.append(text[j + 1])
                        j += 2
                        continue
                    part.append(text[j])
                    j += 1
                if j >= n:
                    raise BatchScriptError("the server line has an unclosed double quote")
                value.append("".join(part))
                i = j + 1
            elif ch == "\\" and i + 1 < n:
                value.append(text[i + 1])
                i += 2
            else:
                value.append(ch)
                i += 1
        words.append(Word(text[start:i], "".join(value)))
    return words


def server_line(script: str) -> ServerLine:
    """The script's server line (see the module); BatchScriptError when there is none, or several `srun` lines and
    no mark."""
    lines = split_lines(script)
    logical: list[tuple[int, int, str]] = []  # (first, last, text joined)
    i = 0
    while i < len(lines):
        first, text = i, lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i]
        logical.append((first, i, text))
        i += 1
    marked = [k for k, (_, _, t) in enumerate(logical) if MARK.match(t)]
    if marked:
        k = marked[0] + 1
        if k >= len(logical) or not logical[k][2].strip():
            raise BatchScriptError("`# bringup: server` is not followed by the server's line")
        chosen = logical[k]
    else:
        sruns = [x for x in logical if _SRUN.match(x[2])]
        if len(sruns) != 1:
            raise BatchScriptError(f"{len(sruns)} lines start with srun: mark the server's with a line "
                                   "`# bringup: server` before it")
        chosen = sruns[0]
    first, last, text = chosen
    indent = text[:len(text) - len(text.lstrip())]
    words = split_words(text)
    if not words:
        raise BatchScriptError("the server line is empty")
    return ServerLine(first, last, indent, tuple(words))


def rewrite(script: str, line: ServerLine, argv: Sequence[str]) -> str:
    """The script with its server line replaced by `argv`: each word bringup did not change as the script writes
    it, each other word quoted."""
    old = line.argv
    raws: list[str] = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(a=old, b=list(argv), autojunk=False).get_opcodes():
        if op == "equal":
            raws += [w.raw for w in line.words[a1:a2]]
        else:
            raws += [shlex.quote(x) for x in argv[b1:b2]]
    lines = split_lines(script)
    new = [*lines[:line.first], line.indent + " ".join(raws), *lines[line.last + 1:]]
    return "\n".join(new) + "\n"
