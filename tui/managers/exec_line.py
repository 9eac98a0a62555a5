"""systemd's command lines (`ExecStart=`), read and rewritten the way systemd itself reads them.

The grammar, from systemd.service(5) "Command lines", systemd.syntax(7) "Quoting" and systemd's parser
(src/core/load-fragment.c `config_parse_exec` over src/basic/extract-word.c `extract_first_word` with
EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE, src/shared/conf-parser.c for the lines), checked against systemd 252 on the test
host:

- lines: a line ending in an unescaped `\\` goes on with the next one, the backslash replaced by a space; a comment
  line (`#` or `;` first) inside a continuation is skipped; an empty line ends it. `KEY = value`: both stripped.
- words: separated by unquoted whitespace; `"..."` and `'...'` quote anywhere in a word (`a"b c"d` is `ab cd`);
  C escapes inside and outside quotes (`\\x20`, `\\s`, `\\n`, `\\101`, `\\u00e9`, ...); an escape systemd does not know
  is kept as written, backslash included (`\\q`, `a\\ b`), with a warning in its log; unbalanced quotes make systemd
  ignore the whole line.
- a lone `;` separates two command lines; `\\;` is the word `;`.
- the first word may start with the prefixes `-`, `@`, `:`, `+`, `!`, `!!` (each once; `+`, `!`, `!!` exclusive);
  `@` makes the second word argv[0].
- specifiers (`%i`, `%N`, ...; `%%` is `%`) are filled in per word, after the escapes, when the unit is loaded.
- variables, when the command runs (not with the `:` prefix): a word that is `$NAME` is the variable split at
  whitespace (zero or more words); `${NAME}` anywhere in a word is its value; `$$` is `$`; any other `$` is itself.

bringup reads a word as its `value`: quotes and escapes resolved, `%%` and `$$` made single, specifiers and variables
left as written (`--model-path ${MODEL}` reads `${MODEL}`): a word holding one is `opaque`, a value bringup cannot
know and must not rewrite. A rewrite (exec_start.py: a unit's lines in effect, and rewriting one) keeps every word
bringup does not change exactly as written (`raw`), and quotes only bringup's own new words (`quote`: `%` as `%%`,
`$` as `$$`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WHITESPACE = " \t\n\r"
COMMENTS = "#;"
#: a word written bare: nothing systemd would read otherwise (no quote, escape, specifier, variable, space or `;`)
_BARE = re.compile(r"[A-Za-z0-9_./:@+=,~-]+")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
                   '"': '"', "'": "'", "s": " "}
_QUOTE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
#: what the usual specifiers stand for (systemd.unit(5) "Specifiers"), for the messages
SPECIFIERS = {"i": "the instance name", "I": "the instance name, unescaped", "n": "the full unit name",
              "N": "the unit name without its type suffix", "p": "the unit name's prefix",
              "P": "the unit name's prefix, unescaped", "j": "the last part of the prefix",
              "H": "the host name", "l": "the short host name", "u": "the user name", "U": "the user's UID",
              "h": "the user's home directory", "t": "the runtime directory", "S": "the state directory",
              "C": "the cache directory", "L": "the logs directory", "E": "the configuration directory",
              "m": "the machine ID", "b": "the boot ID", "f": "the unescaped file name", "d": "the credentials "
              "directory", "y": "the unit file's path", "Y": "the unit file's directory"}


class ExecLineError(ValueError):
    """A command line bringup cannot read or rewrite exactly; the message names the construct."""


@dataclass(frozen=True, slots=True)
class Word:
    raw: str  # as written in the unit (line continuations joined)
    value: str  # as bringup reads it (module docstring)
    specifiers: tuple[str, ...] = ()  # e.g. ("%N",)
    variables: tuple[str, ...] = ()  # e.g. ("${MODEL}",) or ("$EXTRA_ARGS",)

    @property
    def opaque(self) -> bool:
        """Its value is systemd's to fill in (a specifier) or the process environment's (a variable)."""
        return bool(self.specifiers or self.variables)


@dataclass(frozen=True, slots=True)
class ExecLine:
    """One command line of an `ExecStart=`: its words, the first one's prefixes, and where it was read."""

    words: tuple[Word, ...]
    prefix: str = ""  # "-", "@", ":+", ... as written before the program
    source: str = ""  # the unit file or drop-in (systemctl cat's header line)
    written: str = ""  # the whole ExecStart= value as written (lines joined)

    @property
    def argv(self) -> list[str]:
        """What bringup reads: the program (without its prefixes), then every word's value."""
        return [w.value for w in self.words]

    @property
    def no_env(self) -> bool:
        return ":" in self.prefix

    def text(self) -> str:
        """The command line as it would be written back: each word as written, one space between words."""
        return " ".join(w.raw for w in self.words)


@dataclass(frozen=True, slots=True)
class Assignment:
    key: str
    value: str
    section: str
    source: str  # the file (from systemctl cat's `# /path` headers), "" when unknown
    line: int  # its first line in the text it was read from, 1-based


# ----------------------------------------------------------------------------------------------------- lines


def assignments(text: str) -> list[Assignment]:
    """Every `KEY=value` of a unit file, or of `systemctl cat` (files one after the other, each headed by
    `# /path`), in order, with lines joined as systemd joins them."""
    out: list[Assignment] = []
    source = section = ""
    pending: str | None = None  # a continued line so far
    first = 0
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if pending is None:
            stripped = line.strip()
            header = re.fullmatch(r"# (/\S+\.(?:service|conf))", stripped)
            if header and (n == 1 or not lines[n - 2].strip()):
                source, section = header[1], ""
                continue
            joined, first = line, n
        else:
            if line.lstrip(WHITESPACE)[:1] in tuple(COMMENTS):
                continue  # a comment inside a continuation is skipped
            joined = pending + line
        if _ends_escaped(joined):
            pending = joined[:-1] + " "
            continue
        pending = None
        stripped = joined.strip(WHITESPACE)
        if not stripped or stripped[0] in COMMENTS:
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        key, eq, value = stripped.partition("=")
        if eq:
            out.append(Assignment(key.strip(WHITESPACE), value.strip(WHITESPACE), section, source, first))
    if pending is not None:  # a continuation at the end of the text: systemd reads what it has
        stripped = pending.strip(WHITESPACE)
        key, eq, value = stripped.partition("=")
        if eq and stripped[0] not in COMMENTS:
            out.append(Assignment(key.strip(WHITESPACE), value.strip(WHITESPACE), section, source, first))
    return out


def _ends_escaped(s: str) -> bool:
    escaped = False
    for c in s:
        escaped = False if escaped else c == "\\"
    return escaped


# ----------------------------------------------------------------------------------------------------- words


def _escape(s: str, i: int, out: list[str]) -> int:
    """The escape at s[i] (a backslash) into `out`; returns the index after it. An unknown one stays as written."""
    c = s[i + 1] if i + 1 < len(s) else ""
    if c in _SIMPLE_ESCAPES and c:
        out.append(_SIMPLE_ESCAPES[c])
        return i + 2
    digits = {"x": 2, "u": 4, "U": 8}.get(c)
    if digits is not None:
        h = s[i + 2:i + 2 + digits]
        if len(h) == digits and all(x in "0123456789abcdefABCDEF" for x in h):
            code = int(h, 16)
            if c == "x" and code:
                out.append(_byte(code))  # one byte, not a character
                return i + 4
            if c == "u" and code:
                # systemd encodes any 16-bit value as UTF-8, a lone surrogate included
                out += [_byte(b) for b in chr(code).encode("utf-8", "surrogatepass")]
                return i + 6
            if c == "U" and code and _unichar_is_valid(code):
                out.append(chr(code))
                return i + 10
    elif c and c in "01234567":
        o = s[i + 1:i + 4]
        if len(o) == 3 and all(x in "01234567" for x in o) and 0 < int(o, 8) <= 255:
            out.append(_byte(int(o, 8)))
            return i + 4
    if not c:  # a backslash at the very end: kept
        out.append("\\")
        return i + 1
    out.append("\\" + c)
    return i + 2


def _byte(b: int) -> str:
    """A byte among characters: itself when ASCII, else a surrogate escape until the word is decoded."""
    return chr(b) if b < 0x80 else chr(0xDC00 + b)


def _unichar_is_valid(c: int) -> bool:
    """systemd's unichar_is_valid: a code point, not a surrogate, not a noncharacter."""
    return c < 0x110000 and (c & 0xFFFFF800) != 0xD800 and not 0xFDD0 <= c <= 0xFDEF and (c & 0xFFFE) != 0xFFFE


def _decode(parts: list[str]) -> str:
    """Characters, with the single bytes of `\\xHH`/octal escapes among them, as the string systemd passes on."""
    data = "".join(parts).encode("utf-8", "surrogateescape")
    return data.decode("utf-8", "surrogateescape")


def _extract(s: str, i: int) -> tuple[str, int, int] | None:
    """The next word of s from i: (unescaped text, start, end); None when only whitespace is left."""
    n = len(s)
    while i < n and s[i] in WHITESPACE:
        i += 1
    if i >= n:
        return None
    start = i
    out: list[str] = []
    quote = ""
    while i < n:
        c = s[i]
        if c == "\\":
            i = _escape(s, i, out)
        elif quote:
            if c == quote:
                quote = ""
            else:
                out.append(c)
            i += 1
        elif c in "'\"":
            quote = c
            i += 1
        elif c in WHITESPACE:
            break
        else:
            out.append(c)
            i += 1
    if quote:
        raise ExecLineError(f"unbalanced quotes in {s[start:]!r}: systemd ignores this line")
    return _decode(out), start, i


def words(s: str) -> list[tuple[str, str]]:
    """The words of s as (raw, unescaped), by systemd's quoting rules (no `;` handling: see `parse`)."""
    out = []
    i = 0
    while (w := _extract(s, i)) is not None:
        text, start, i = w
        out.append((s[start:i], text))
    return out


def _meaning(text: str, *, program: bool, no_env: bool) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """A word's value for bringup, its specifiers and its variables."""
    specs: list[str] = []
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "%":
            nxt = text[i + 1:i + 2]
            if nxt == "%":
                out.append("%")
            else:
                specs.append("%" + nxt)
                out.append("%" + nxt)
            i += 1 + len(nxt)
            continue
        out.append(text[i])
        i += 1
    value = "".join(out)
    if program or no_env:
        return value, tuple(specs), ()
    if value.startswith("$") and value[1:2] not in ("{", "$"):
        return value, tuple(specs), (value,)  # the whole word a variable, split at whitespace
    variables: list[str] = []
    res: list[str] = []
    i = 0
    while i < len(value):
        if value.startswith("$$", i):
            res.append("$")
            i += 2
        elif value.startswith("${", i) and "}" in value[i + 2:]:
            end = value.index("}", i + 2) + 1
            variables.append(value[i:end])
            res.append(value[i:end])
            i = end
        else:
            res.append(value[i])
            i += 1
    return "".join(res), tuple(specs), tuple(variables)


def _prefix(first: str) -> tuple[str, str]:
    """The first word's prefixes (systemd's own rules: each once, one of `+`, `!`, `!!`) and the program."""
    seen = ""
    i = 0
    while i < len(first):
        c = first[i]
        once = c in "-@:" and c not in seen
        privileged = (c == "+" and not any(x in seen for x in "+!")) or (
            c == "!" and "+" not in seen and seen.count("!") < 2)
        if once or privileged:
            seen += c
        else:
            break
        i += 1
    return first[:i], first[i:]


def parse(value: str, source: str = "") -> ExecLine:
    """One `ExecStart=` value (lines already joined) as an ExecLine. Raises ExecLineError for what systemd would
    refuse or bringup could not write back exactly: unbalanced quotes, several command lines (`;`), no program."""
    s = value
    i = 0
    out: list[Word] = []
    prefix = ""
    while True:
        while i < len(s) and s[i] in WHITESPACE:
            i += 1
        if i >= len(s):
            break
        if out and s[i] == ";" and (i + 1 == len(s) or s[i + 1] in WHITESPACE):
            raise ExecLineError("several command lines in one ExecStart= (a lone `;`): systemd runs them one "
                                "after the other (Type=oneshot only), bringup rewrites one command line")
        if out and s.startswith("\\;", i) and (i + 2 == len(s) or s[i + 2] in WHITESPACE):
            out.append(Word("\\;", ";"))
            i += 2
            continue
        got = _extract(s, i)
        if got is None:
            break
        text, start, i = got
        raw = s[start:i]
        if not out:
            if text == ";":
                raise ExecLineError("an ExecStart= that starts with `;`")
            prefix, program = _prefix(text)
            if not program:
                raise ExecLineError(f"no program in ExecStart={value!r}")
            v, specs, variables = _meaning(program, program=True, no_env=True)
            out.append(Word(raw, v, specs, variables))
            continue
        v, specs, variables = _meaning(text, program=False, no_env=":" in prefix)
        out.append(Word(raw, v, specs, variables))
    if not out:
        raise ExecLineError("an empty command line")
    return ExecLine(tuple(out), prefix, source, value)


def read(value: str, source: str = "") -> ExecLine:
    """`parse`, never failing: a line systemd could not read either is read word by word at whitespace (for
    showing; `rewrite` refuses it, through `parse`)."""
    try:
        return parse(value, source)
    except ExecLineError:
        return ExecLine(tuple(Word(w, w) for w in value.split()), "", source, value)


# ----------------------------------------------------------------------------------------------------- writing


def quote(arg: str, *, no_env: bool = False) -> str:
    """One of bringup's own words for a command line: read back by systemd (and by `parse`) as exactly `arg`, with
    no specifier and no variable in it."""
    if arg == ";":
        return "\\;"
    if _BARE.fullmatch(arg):
        return arg
    out = []
    for c in arg:
        if c in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[c])
        elif c == "%":
            out.append("%%")
        elif c == "$" and not no_env:
            out.append("$$")
        elif "\udc80" <= c <= "\udcff":  # a byte that is not UTF-8 (from a \x escape)
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
