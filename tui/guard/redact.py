"""The one redactor (issue 47): every text bringup lets out goes through `scrub`, which hides each secret's value.

Why one function and a book, not a rule applied by each output: a rule applied where a leak was found is missing
from the next output someone writes (the restart banner's old value, `wait`'s excerpt of a server that echoed its
command line, a sweep's stdout all printed values). Here:

- the BOOK is the process's set of secret values known so far, learned from every command line bringup reads or
  writes (by the name rule of `secret_names.py`, plus the flags a config declares secret: `secret_flags`), from the
  environment (`*_TOKEN`, `*_KEY`, `HF_TOKEN`, ...: `learn_environment`), from a deployment's `env`, and from any
  text `scrub` sees that names a secret (`--api-key V`, `HF_TOKEN=V`, `api_key='V'`), so a value named once is hidden
  everywhere after, under any name or none;
- `scrub(text)` hides the value of every named secret it finds (whatever its length) and every value the book holds,
  as `***`. It only ever replaces a value's own characters, so a JSON document stays JSON. A value is also found in
  every spelling an output of bringup gives it (`spellings`): JSON-escaped (ASCII or not, and twice, JSON in JSON),
  a Python repr's, inside a shell word's quotes (`shlex.quote` writes `'` as `'"'"'`) and URL-quoted, so a secret
  with a quote, a backslash or a non-ASCII letter is hidden wherever it is printed.

Where it is applied, so that no output path can go around it: the CLI wraps its stdout and stderr at entry
(`ScrubbingWriter`: every print and JSON dump); a server's log lines are scrubbed as they enter the engine
(`tui/engine/logs.py`: the console's log panel, error excerpt, history and records see them redacted); the
console's notifications and command line, and the exporter's label values call it.

Short values: a value shorter than `MIN_LEN` learned by a name (`--api-key k3y-7`, a declared flag's, `HF_TOKEN`'s)
is kept too, and hidden as a whole word only (not inside a longer one: `abc` never blanks `abcdef`), so that
`bringup flags`' `name value` table, which is no `--flag V`, does not show it. Limits: a value of one or two
characters, or one that is a number (it would blank the counts and JSON numbers of every output), is hidden only
where a name points at it; a value split over two writes to a stream is not seen whole. The values bringup needs
to start the server again are kept, unredacted, only in its private files (the process manager's argv files, the
unit files), which never go through here.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from .secret_names import REDACTED, is_secret, secret_values

#: the shortest value hidden wherever it appears (by value alone)
MIN_LEN = 6
#: the shortest value learned by a name that is kept, and hidden as a whole word (see "Short values" above)
MIN_WORD_LEN = 3
#: what may not stand on either side of a short value for it to be hidden: it is a word of its own there
_WORD = r"[\w-]"
#: a number: never a short value by itself (`"pid": 12345` would stop being JSON)
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")
#: values that are a setting's words, never a secret's
_NOT_VALUES = frozenset({"none", "null", "true", "false", "redacted", REDACTED})

#: names of one word that are a secret's, quoted in a server's words or JSON (`'password': '...'`)
_ONE_WORD_SECRETS = frozenset({"password", "passwd", "passphrase", "secret", "apikey", "credentials"})
#: a value as found in text: no space, quote, backslash or closing punctuation, so a JSON document stays one
_VALUE = r"""(?!-)[^\s'"\\,;)\]}]+"""
#: a secret named in text: `--api-key V` or `--api-key=V` (`V` may be quoted: `--api-key "a b"`; and a change's
#: `-> NEW`), `HF_TOKEN=V`, and a
#: server's own words `api_key='V'`, `'api_key': 'V'`, `"api_key": "V"`
_NAMED = re.compile(
    rf"""(?<![\w-])(?P<flag>--?[A-Za-z][\w-]*)(?:=|[ \t]+)"""
    r"""(?:(?P<fq>['"])(?P<fqv>(?:\\.|(?!(?P=fq))[^\\\n])*)(?P=fq)|"""
    rf"""(?P<fv>{_VALUE}))(?:[ \t]+->[ \t]+(?P<nv>{_VALUE}))?"""
    rf"""|(?<![\w-])(?P<env>[A-Z][A-Z0-9_]*)=(?P<ev>{_VALUE})"""
    r"""|(?P<key>\b[A-Za-z][\w-]*)['"]?[ \t]*[:=][ \t]*(?P<q>['"])(?P<qv>(?:\\.|(?!(?P=q))[^\\\n])*)(?P=q)""")
#: a backslash escape inside a quoted value (`'sk-ab\'cd'`, `"sk-ab\"cd"`), undone to learn the value itself
_ESCAPE = re.compile(r"\\(.)")


def spellings(value: str) -> set[str]:
    """`value` as each output of bringup may spell it: itself, JSON-escaped (ASCII or not, and a JSON string's
    inside another: a record's excerpt that quotes JSON), a Python repr's inside (a server's `ServerArgs(...)`), a
    shell word's inside (`shlex.quote` writes `'` as `'"'"'`) and URL-quoted. Each only ever spans the value's own
    characters, so hiding it keeps the quotes around it, and a JSON document stays one."""
    json_ascii, json_utf8 = json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]
    return {value, json_ascii, json_utf8, json.dumps(json_ascii)[1:-1], json.dumps(json_utf8, ensure_ascii=False)[1:-1],
            repr(value)[1:-1], _in_shell_quotes(value), urllib.parse.quote(value, safe="")} - {""}


def hide(text: str, value: str) -> str:
    """`text` with `value` `***` in every spelling (`spellings`), whatever its length: for a message about one
    value known to be a secret but not learned (the flags dialog's refusal of a key typed and not applied)."""
    for form in sorted(spellings(value), key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return text


def _in_shell_quotes(value: str) -> str:
    """What `shlex.quote` puts between its outer quotes (its only escape: `'` as `'"'"'`)."""
    quoted = shlex.quote(value)
    return quoted[1:-1] if quoted != value else value


class Book:
    """The secret values this process knows, and the flag names its config declares secret. Thread-safe: the
    engine's log lines and the CLI's writers may scrub from different threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        #: short values learned by a name, hidden as whole words only
        self._words: set[str] = set()
        self._declared: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None

    @property
    def declared(self) -> frozenset[str]:
        return self._declared

    def declare(self, flags: Iterable[str]) -> None:
        """Flags a config declares secret (`secret_flags = ["--served-model-name"]`): their values are hidden like
        `--api-key`'s."""
        names = {"--" + f.strip().lstrip("-") for f in flags if f.strip().lstrip("-")}
        with self._lock:
            self._declared = self._declared | names

    def learn(self, value: str, *, named: bool = False) -> None:
        """One secret value, hidden from now on wherever it appears, in every spelling (`spellings`). `named`: a
        name said it is a secret's (a flag's, a variable's), so a short one is kept too, as a whole word."""
        v = value.strip()
        if not v or v.lower() in _NOT_VALUES or REDACTED in v:
            return
        if len(v) >= MIN_LEN:
            into = self._values
        elif named and len(v) >= MIN_WORD_LEN and not _NUMBER.fullmatch(v):
            into = self._words
        else:
            return
        forms = spellings(v)
        with self._lock:
            if forms <= into:
                return
            into |= forms
            self._pattern = None

    def learn_argv(self, argv: Sequence[str]) -> None:
        """The secrets of a command line bringup read or is about to write."""
        for value in secret_values(argv, self._declared).values():
            self.learn(value, named=True)

    def learn_set(self, item: str) -> None:
        """A `--set NAME=VALUE` of bringup's own command line (`restart --set api-key=V`): a secret flag's value is
        learned before anything checks it, so a refusal that repeats the value (`value 'V' has characters ...`)
        shows it hidden too."""
        name, eq, value = item.partition("=")
        name = name.strip().lstrip("-")
        if eq and name and (is_secret(name) or "--" + name in self._declared):
            self.learn(value, named=True)

    def learn_env(self, env: Mapping[str, str]) -> None:
        """The secrets of an environment (a deployment's `env`, or the process's own): by the name rule."""
        for name, value in env.items():
            if is_secret(name):
                self.learn(value, named=True)

    def knows(self, value: str) -> bool:
        return value in self._values or value in self._words

    def pattern(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._pattern is None and (self._values or self._words):
                # longest first: a value that contains another is hidden whole; a short one only as a word
                alts = sorted(self._values | self._words, key=len, reverse=True)
                self._pattern = re.compile("|".join(
                    re.escape(v) if v in self._values else rf"(?<!{_WORD}){re.escape(v)}(?!{_WORD})" for v in alts))
            return self._pattern

    def forget(self) -> None:
        """Empty the book (tests; a process that serves another configuration)."""
        with self._lock:
            self._values.clear()
            self._words.clear()
            self._declared = frozenset()
            self._pattern = None


#: the process's one book
BOOK = Book()


def _named_secret(m: re.Match[str], declared: frozenset[str]) -> bool:
    if m["flag"] is not None:
        return is_secret(m["flag"]) or m["flag"] in declared
    if m["env"] is not None:
        return is_secret(m["env"])
    key = m["key"]
    if ("--" + key.replace("_", "-")) in declared:
        return True
    # a bare `key`/`token`/`auth` in quotes is a field of bringup's own JSON (`"key": "g"`, a flag's key binding),
    # not a secret's name: a name of one word is taken only when nothing else could be meant by it
    return is_secret(key) and (bool(re.search(r"[-_]", key.strip("-_"))) or key.lower() in _ONE_WORD_SECRETS)


def _hide_named(m: re.Match[str]) -> str:
    text, base = m[0], m.start()
    for g in ("qv", "ev", "nv", "fv", "fqv"):  # from the right: the spans before stay where they are
        if m[g] and m[g] != REDACTED:
            BOOK.learn(m[g], named=True)
            if g in ("qv", "fqv") and "\\" in m[g]:  # a repr's or JSON's escapes: the value itself too
                BOOK.learn(_ESCAPE.sub(r"\1", m[g]), named=True)
            a, b = m.span(g)
            text = text[:a - base] + REDACTED + text[b - base:]
    return text


def scrub(text: str) -> str:
    """`text` with every secret's value `***`: every value the book holds, and those a name in it points at
    (learned on the way, and hidden wherever else they are in `text`). The one function every output of bringup
    goes through. The book goes first: a known value with a quote in it (`sk-pa'ss`) is hidden whole before the
    name rule, which stops a value at a quote, could cut it in two and leave its end."""
    if not text:
        return text
    out = _by_value(text)
    declared = BOOK.declared
    parts: list[str] = []
    pos = done = 0
    while (m := _NAMED.search(out, pos)) is not None:
        if _named_secret(m, declared):
            parts += [out[done:m.start()], _hide_named(m)]
            pos = done = m.end()
        else:  # past its name only: what looked like its value may be a secret's name (`--enable-x HF_TOKEN=V`)
            pos = m.end("flag") if m["flag"] else m.end("env") if m["env"] else m.end("key")
    if not parts:
        return out  # the same string when nothing was named
    return _by_value("".join([*parts, out[done:]]))  # a value named here is hidden where else it is too


def _by_value(text: str) -> str:
    pattern = BOOK.pattern()
    return pattern.sub(REDACTED, text) if pattern is not None else text


def scrub_obj(obj: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string scrubbed: for what is built before it is
    written (an exporter's labels)."""
    if isinstance(obj, str):
        return scrub(obj)
    if isinstance(obj, dict):
        return {scrub(str(k)) if isinstance(k, str) else k: scrub_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(scrub_obj(v) for v in obj)
    return obj


def learn_environment(environ: Mapping[str, str] | None = None) -> None:
    """The secrets of this process's environment (`HF_TOKEN`, `OPENAI_API_KEY`, ...): a server started from it, or
    a config that names them, may echo them."""
    BOOK.learn_env(os.environ if environ is None else environ)


class ScrubbingWriter:
    """A text stream whose every write is scrubbed first: the CLI's stdout and stderr (`tui/cli/__init__.py`
    installs it at entry), so a print or a JSON dump anywhere in a command cannot let a secret out.

    Nothing under it is handed out (issue 47): its `buffer` is a `ScrubbingByteWriter` over the stream's own, and it
    has no `fileno` and no `detach`, so neither `w.buffer.write(...)` nor `os.write(w.fileno(), ...)` can go around
    it. A program that needs the terminal's descriptor (Textual's driver, `faulthandler`, `os.get_terminal_size`)
    asks `sys.__stdout__`/`sys.__stderr__`, which are not wrapped; a child process inherits descriptors 1 and 2
    whatever `sys.stdout` is. Only what describes the stream is forwarded (`_FORWARDED`)."""

    #: the stream's attributes that describe it and write nothing
    _FORWARDED = frozenset({"isatty", "encoding", "errors", "newlines", "closed", "name", "mode", "line_buffering",
                            "write_through", "readable", "writable", "seekable"})

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        inner = getattr(stream, "buffer", None)
        self.buffer = None if inner is None else ScrubbingByteWriter(inner, stream)

    def write(self, text: str) -> int:
        self.stream.write(scrub(text))
        return len(text)  # what the caller gave: a shorter count would make it write the rest again

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        raise io.UnsupportedOperation("bringup's stdout/stderr scrub secrets and have no descriptor to write to "
                                      "around them (use sys.__stdout__ for the terminal)")

    def __getattr__(self, name: str) -> Any:
        if name in self._FORWARDED:
            return getattr(self.stream, name)
        raise AttributeError(f"{type(self).__name__} has no {name!r}: what it wraps is not handed out")


class ScrubbingByteWriter:
    """The bytes side of a `ScrubbingWriter` (`sys.stdout.buffer`): each write decoded with the stream's encoding,
    scrubbed and encoded again (bytes that are no text in it go through as they came: surrogateescape), after the
    text side is flushed, so the two stay in order."""

    def __init__(self, raw: Any, text: TextIO) -> None:
        self._raw, self._text = raw, text
        self._encoding = getattr(text, "encoding", None) or "utf-8"

    def write(self, data: bytes | bytearray | memoryview) -> int:
        b = bytes(data)
        self._text.flush()
        self._raw.write(scrub(b.decode(self._encoding, "surrogateescape")).encode(self._encoding, "surrogateescape"))
        return len(b)

    def writelines(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._raw.flush()

    def fileno(self) -> int:
        raise io.UnsupportedOperation("bringup's stdout/stderr scrub secrets and have no descriptor to write to "
                                      "around them (use sys.__stdout__ for the terminal)")

    def isatty(self) -> bool:
        return bool(self._raw.isatty())
