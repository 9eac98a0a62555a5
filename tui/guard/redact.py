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
  as `***`. It only ever replaces a value's own characters, so a JSON document stays JSON (a value is also found in
  its JSON-escaped spelling).

Where it is applied, so that no output path can go around it: the CLI wraps its stdout and stderr at entry
(`ScrubbingWriter`: every print and JSON dump); a server's log lines are scrubbed as they enter the engine
(`tui/engine/logs.py`: the console's log panel, error excerpt, history and records see them redacted); the
console's notifications and command line, and the exporter's label values call it.

Limits: a value shorter than `MIN_LEN` is hidden where a name says it is a secret, never by value alone (a
two-letter "secret" would blank every word that contains it); a value split over two writes to a stream is not
seen whole. The values bringup needs to start the server again are kept, unredacted, only in its private files
(the process manager's argv files, the unit files), which never go through here.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from .secret_names import REDACTED, is_secret, secret_values

#: the shortest value hidden wherever it appears (by value alone)
MIN_LEN = 6
#: values that are a setting's words, never a secret's
_NOT_VALUES = frozenset({"none", "null", "true", "false", "redacted", REDACTED})

#: names of one word that are a secret's, quoted in a server's words or JSON (`'password': '...'`)
_ONE_WORD_SECRETS = frozenset({"password", "passwd", "passphrase", "secret", "apikey", "credentials"})
#: a value as found in text: no space, quote, backslash or closing punctuation, so a JSON document stays one
_VALUE = r"""(?!-)[^\s'"\\,;)\]}]+"""
#: a secret named in text: `--api-key V` or `--api-key=V` (and a change's `-> NEW`), `HF_TOKEN=V`, and a
#: server's own words `api_key='V'`, `'api_key': 'V'`, `"api_key": "V"`
_NAMED = re.compile(
    rf"""(?<![\w-])(?P<flag>--?[A-Za-z][\w-]*)(?:=|[ \t]+)(?P<fv>{_VALUE})(?:[ \t]+->[ \t]+(?P<nv>{_VALUE}))?"""
    rf"""|(?<![\w-])(?P<env>[A-Z][A-Z0-9_]*)=(?P<ev>{_VALUE})"""
    r"""|(?P<key>\b[A-Za-z][\w-]*)['"]?[ \t]*[:=][ \t]*(?P<q>['"])(?P<qv>[^'"\\\n]*)(?P=q)""")


class Book:
    """The secret values this process knows, and the flag names its config declares secret. Thread-safe: the
    engine's log lines and the CLI's writers may scrub from different threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
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

    def learn(self, value: str) -> None:
        """One secret value, hidden from now on wherever it appears (a value shorter than MIN_LEN: see the limits)."""
        v = value.strip()
        if len(v) < MIN_LEN or v.lower() in _NOT_VALUES:
            return
        forms = {v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1]}
        with self._lock:
            if forms <= self._values:
                return
            self._values |= forms
            self._pattern = None

    def learn_argv(self, argv: Sequence[str]) -> None:
        """The secrets of a command line bringup read or is about to write."""
        for value in secret_values(argv, self._declared).values():
            self.learn(value)

    def learn_env(self, env: Mapping[str, str]) -> None:
        """The secrets of an environment (a deployment's `env`, or the process's own): by the name rule."""
        for name, value in env.items():
            if is_secret(name):
                self.learn(value)

    def knows(self, value: str) -> bool:
        return value in self._values

    def pattern(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._pattern is None and self._values:
                # longest first: a value that contains another is hidden whole
                alts = sorted(self._values, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(v) for v in alts))
            return self._pattern

    def forget(self) -> None:
        """Empty the book (tests; a process that serves another configuration)."""
        with self._lock:
            self._values.clear()
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
    for g in ("qv", "ev", "nv", "fv"):  # from the right: the spans before stay where they are
        if m[g] and m[g] != REDACTED:
            BOOK.learn(m[g])
            a, b = m.span(g)
            text = text[:a - base] + REDACTED + text[b - base:]
    return text


def scrub(text: str) -> str:
    """`text` with every secret's value `***`: those a name in it points at (learned on the way), and every value
    the book holds. The one function every output of bringup goes through."""
    if not text:
        return text
    declared = BOOK.declared
    parts: list[str] = []
    pos = done = 0
    while (m := _NAMED.search(text, pos)) is not None:
        if _named_secret(m, declared):
            parts += [text[done:m.start()], _hide_named(m)]
            pos = done = m.end()
        else:  # past its name only: what looked like its value may be a secret's name (`--enable-x HF_TOKEN=V`)
            pos = m.end("flag") if m["flag"] else m.end("env") if m["env"] else m.end("key")
    out = "".join([*parts, text[done:]]) if parts else text  # the same string when nothing was named
    pattern = BOOK.pattern()
    return pattern.sub(REDACTED, out) if pattern is not None else out


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
    installs it at entry), so a print or a JSON dump anywhere in a command cannot let a secret out."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(scrub(text))
        return len(text)  # what the caller gave: a shorter count would make it write the rest again

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer...: the stream's own
        return getattr(self.stream, name)
