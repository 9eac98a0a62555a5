"""Turning raw server output into clean message text.

Servers' lines reach us wrapped in other programs' prefixes (journald, docker compose, SGLang's rank tags, vLLM's
process tags) and split by tqdm's carriage returns. Each wrapper is a regex anchored at the start of the line,
applied in the order they nest; nothing here can fail on arbitrary input (a hypothesis test feeds it garbage).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple, Protocol

from tui.guard.numbers import real_or_none, whole
from tui.guard.text import LINE_END

# What a server's text may not bring to a terminal (`terminal_safe`, the one rule; `sanitize` for a log line).
# Stripped, not shown escaped, so that escape codes can neither act on the user's terminal (VTE and xterm.js act on
# 8-bit C1 controls sent as UTF-8 too: U+009B is a CSI, U+009D an OSC, so `\xc2\x9b2J` clears the screen and an OSC
# 52 writes the clipboard) nor reorder what it shows (bidi overrides), nor defeat the anchored prefix regexes below:
# - escape sequences, 7-bit and 8-bit: CSI (`ESC [`, U+009B) to its final byte; OSC, DCS, SOS, PM, APC strings
#   (`ESC ] P X ^ _`, U+009D U+0090 U+0098 U+009E U+009F) to their terminator (BEL, `ESC \`, U+009C) or the end of
#   the line; every other `ESC` sequence (`ESC c`, `ESC ( B`);
_ANSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
                   r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
                   r"|\x1b[ -/]*[0-~]")
_ESCAPES = re.compile(r"[\x1b\x90\x98\x9b\x9d-\x9f]")
# - control characters: C0 but tab and newline, DEL, C1 (Unicode Cc), and lone surrogates (which a JSON `\ud800`
#   escape can produce, and which no terminal can be sent: encoding them raises);
# - format characters (Unicode Cf): the bidi embeddings, overrides, isolates and marks (U+202A-U+202E,
#   U+2066-U+2069, U+200E, U+200F, U+061C), which reorder what a terminal shows, and the invisible rest (U+200B, the
#   soft hyphen, U+FEFF, the tag characters), but for ZERO WIDTH JOINER (U+200D: inside emoji sequences, 👩‍💻) and
#   ZERO WIDTH NON-JOINER (U+200C: Persian, Indic scripts), which are kept. Every other character is kept: CJK,
#   accents, emoji, no-break spaces. (The class is Unicode 15's Cf; tests/unit/test_control_characters.py holds it
#   to the running Python's unicodedata.)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff"
                      "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f"
                      "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
                      "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                      "\U000e0001\U000e0020-\U000e007f]")
#: format characters `terminal_safe` keeps
KEPT_FORMAT = frozenset("\u200c\u200d")
# - the line and paragraph separators (Unicode Zl and Zp: U+2028, U+2029) become a space: one line of a server's
#   stays one line wherever it is shown (a terminal, the log panel, the run history, an incident's Markdown, where
#   they end a line), and the words either side stay apart. (Held to the running Python's unicodedata by
#   tests/unit/test_control_characters.py.)
_SEPARATORS = {0x2028: " ", 0x2029: " "}

_JOURNAL_SHORT = re.compile(
    r"^(?P<mon>[^\W\d_]{3,4}\.?) +(?P<day>\d{1,2}) (?P<time>\d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"(?P<host>\S+) (?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: "
)
_JOURNAL_ISO = re.compile(
    r"^(?P<iso>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?) "
    r"(?P<host>\S+) (?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: "
)
#: the node a line came from, in a deployment over several nodes (tui/managers/multinode.py): the outermost
#: wrapper, kept in the body an excerpt shows, so that a failure names the node that printed it
_NODE = re.compile(r"^\u27e6(?P<node>[^\u27e7\s]{1,64})\u27e7 ")
_COMPOSE = re.compile(r"^(?P<svc>[A-Za-z0-9][\w.-]*)\s+\| ")
#: a CI runner's or `docker logs --timestamps`' stamp before the line: `[2025-12-15T20:35:11Z] `,
#: `2024-03-30T14:16:55.598106565Z `
_ISO_STAMP = re.compile(r"^\[?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\]? ")
#: SGLang's `[ts( ranks)] `. The opening `[` is optional when a full date follows (pasted logs lose it:
#: `2025-01-02 10:00:00 TP0] ...`); the date may be `MM-DD` (sglang's multimodal server); SGLang 0.1-0.2 wrote
#: `[gpu_id=N] ` and no time.
_SGLANG = re.compile(
    r"^(?:\[|(?=\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[^\]\s]*(?: [A-Z_]+\d+)*\]))"
    r"(?:(?P<date>(?:\d{4}-)?\d{2}-\d{2}) )?(?P<time>\d{2}:\d{2}:\d{2})(?P<ms>\.\d{3})?"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ?"
    r"|^\[gpu_id=(?P<gpu>\d+)\] "
)
#: vLLM's `(proc pid=N) LEVEL MM-DD hh:mm:ss [file.py:N] `; a worker under the engine core, or a Ray actor,
#: adds a second process tag in front: `(EngineCore_DP0 pid=1) (Worker_TP7 pid=2) ERROR ...`
_VLLM = re.compile(
    r"^(?:\([^)]*\)\s+(?=\())?"
    r"(?:\((?P<proc>[^)]*?)(?: pid=\d+)?\)\s*)?(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? \[?(?P<src>[^\]\s]+):(?P<ln>\d+)\]? "
)
_VLLM_PROC_ONLY = re.compile(r"^(?:\([A-Za-z_][\w]*(?: pid=\d+)?\)\s+)*\((?P<proc>[A-Za-z_][\w]*(?: pid=\d+)?)\)\s+")
_UVICORN_LEVEL = re.compile(r"^(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")

_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}

#: A log line longer than this is cut: a single megabyte-long line must not stall the console or the reducer.
MAX_LINE = 16_384


class CleanLine(NamedTuple):
    """A server message with its wrappers removed. (A NamedTuple: built for every line the server prints, and a
    frozen dataclass costs three times as much to construct.)

    `prefixed` says whether the server's own logger prefix was present: tracebacks and tqdm bars have none, which
    is how a traceback's lines are told apart from the next ordinary log line.
    """

    text: str
    prefixed: bool
    #: the line with only outer wrappers (journald, docker compose) removed: what an excerpt shows
    body: str = ""
    level: str = ""
    ranks: str = ""
    ts: float | None = None
    #: the journald identifier (`python3`, `bash`, `systemd`) when the line came in journald's short format
    ident: str = ""


#: levels at which a logged line is an error line whatever it says
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL"})
#: the shape of a bare traceback line (no logger prefix): a frame, its source line, a caret line, a chaining line
_TRACEBACK = re.compile(
    r"^(?:\s|Traceback \(most recent call last\)|During handling of the above exception"
    r"|The above exception was the direct cause|File \"|\^|~|$)"
)
#: the last line of a traceback: the exception's qualified name
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)\b")
#: words of trouble the errors view shows beside the error lines, and a cheap screen before `clean` (every error
#: line at ERROR or CRITICAL level carries one of them in its raw text)
TROUBLE_WORDS = ("Error", "ERROR", "error:", "Exception", "Traceback", "WARNING", "Warning", "Killed", "failed",
                 "Failed", "sigquit", "SIGQUIT", "died", "crashed", "CRITICAL", "FATAL", "out of memory")


def is_error_line(c: CleanLine) -> bool:
    """The one definition of an error line: logged at ERROR or CRITICAL, or a bare line shaped like part of a
    traceback. It opens an error block (a failure's excerpt, the errors view); a preset adds its fatal wordings.
    A blank line is none."""
    if c.level in ERROR_LEVELS:
        return True
    t = c.text
    return not c.prefixed and bool(t.strip()) and bool(_TRACEBACK.match(t) or _EXCEPTION.match(t))


def continues_block(c: CleanLine) -> bool:
    """A line that carries on an open error block: a non-blank line without the server's logger prefix (a
    traceback's frames, a multi-line message); the next prefixed line ends the block."""
    return not c.prefixed and bool(c.text.strip())


def is_warning_line(c: CleanLine) -> bool:
    """A line the errors view shows although it is no error line: logged at WARNING, or naming trouble in words
    (`failed`, `died`, `out of memory`). The reducer ignores these: a warning is no part of a failure's excerpt."""
    return c.level == "WARNING" or any(w in c.text for w in TROUBLE_WORDS)


class LineKind(StrEnum):
    """What a log line is to the errors view, decided once, by the engine, with the preset's fatal wordings: the
    console only shows it. A block opened by an error or a warning line goes on over the lines that continue it."""

    #: an error line (`is_error_line`), or one of the preset's fatal wordings, at whatever level it is logged
    ERROR = "error"
    #: a warning (`is_warning_line`): shown, though no part of a failure's excerpt
    WARNING = "warning"
    #: a line carrying on the block above it: a traceback's frames, a multi-line message
    CONTINUATION = "continuation"
    #: every other line: shown among all lines only
    PLAIN = "plain"


class Wordings(Protocol):
    """A preset's list of wordings (its `fatal`): searched like a compiled regex."""

    def search(self, text: str) -> object: ...


def line_kind(raw: str, c: CleanLine, after: LineKind, fatal: bool = False) -> LineKind:
    """The one classification of a line for the errors view: `raw` as read, `c` cleaned, `after` the kind of the
    line before it, `fatal` whether it is one of the preset's fatal wordings (the reducer has searched for them
    already: reducer.py's `reduce_classified`). Outside a block, a line without a trouble word in its raw text (the
    level words among them) is plain: a traceback's shape alone (an indented line, a `File "..."` frame) is shown
    only in a block that an error or a warning opened."""
    if fatal:
        return LineKind.ERROR
    if after is LineKind.PLAIN and not any(w in raw for w in TROUBLE_WORDS):
        return LineKind.PLAIN
    if is_error_line(c):
        return LineKind.ERROR
    if is_warning_line(c):
        return LineKind.WARNING
    if after is not LineKind.PLAIN and continues_block(c):
        return LineKind.CONTINUATION
    return LineKind.PLAIN


def line_kinds(texts: Iterable[str], fatal: Wordings | None = None,
               after: LineKind = LineKind.PLAIN) -> tuple[LineKind, ...]:
    """The kinds of lines read in a row, `fatal` the preset's fatal wordings. The engine classifies lines as its
    reducer reads them (reducer.py's `reduce_classified`: each line cleaned and searched once); this is for lines
    no reducer reads (a test's)."""
    kinds = []
    for text in texts:
        c = clean(text)
        after = line_kind(text, c, after, fatal is not None and bool(fatal.search(c.text)))
        kinds.append(after)
    return tuple(kinds)


#: an HTTP access line (uvicorn's, a proxy's): a request answered, not the server saying how far it has got
_ACCESS = re.compile(r'"(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) \S* HTTP/\d(?:\.\d)?"')


def is_access_line(text: str) -> bool:
    """An HTTP access line: a request answered (a client's, or bringup's own probe or scrape)."""
    return bool(_ACCESS.search(text))


def latest_progress(tail: Sequence[str]) -> str:
    """The last line the server printed about itself (a shard bar, `Capturing batches (bs=64 ...)`, `Load weight
    end`), as text without its prefixes: what a bring-up is doing now, or the last thing it did before a hang.
    Access lines are skipped: bringup's own probes and the clients' requests say nothing of the server's progress."""
    for body in reversed(tail):
        t = clean(body).text.strip()
        if t and not _ACCESS.search(t):
            return t
    return ""


def terminal_safe(text: str) -> str:
    """`text` (a server's, a host's: anything bringup did not write itself) with nothing left that a terminal acts
    on: escape sequences (7-bit and 8-bit), control characters but tab and newline, lone surrogates, and format
    characters but ZWJ and ZWNJ, removed, and line and paragraph separators made a space (the rule above
    `_ANSI`). Every place that shows or prints such text passes it through here, `sanitize` (a log line) or `clean`
    (which sanitizes)."""
    if text.isprintable():  # the common case, decided in C: no escape codes, control, format or separator characters
        return text
    if _ESCAPES.search(text):
        text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text)
    return text.translate(_SEPARATORS) if "\u2028" in text or "\u2029" in text else text


def sanitize(raw: str) -> str:
    """A log line made safe for a terminal (`terminal_safe`), and cut when absurdly long."""
    if len(raw) > MAX_LINE:
        raw = raw[:MAX_LINE] + " …[cut]"
    return terminal_safe(raw)


_EOLS = LINE_END  # the one set of line ends (tui/guard/text.py)


def split_output(chunk: str) -> list[str]:
    """Split raw output on newlines and tqdm's carriage returns, dropping empty pieces."""
    if "\r" not in chunk and "\n" not in chunk:  # one line, as most are: no regex to run
        return [chunk] if chunk.strip() else []
    return [p for p in _EOLS.split(chunk) if p.strip()]


def node_tag(name: str) -> str:
    """What a line of node `name` starts with: `⟦gpu-b⟧ `."""
    return f"\u27e6{name}\u27e7 "


@lru_cache(maxsize=32)
def clean(raw: str, ref_year: int = 2026) -> CleanLine:
    """Strip every known wrapper from one line. `ref_year` dates timestamps that carry no year (journald, vLLM).
    Cached (a CleanLine is immutable): a line is cleaned where it is read and again where it is reduced, one right
    after the other, and cleaning is a tenth of what a line costs."""
    text = sanitize(raw)
    tag = ""
    if text[:1] == "\u27e6":
        m = _NODE.match(text)
        if m:
            tag, text = m.group(0), text[m.end():]
    ts: float | None = None
    ident = ""
    m = _JOURNAL_SHORT.match(text)
    if m:
        ident = m["ident"]
        month = _MONTHS.get(m["mon"][:3])
        if month is not None:
            try:
                day = whole(m["day"], "day", low=1, high=31, text=True)
                ts = _local_ts(f"{ref_year}-{month:02d}-{day:02d} {m['time']}")
            except ValueError:
                ts = None
        text = text[m.end():]
    else:
        m = _JOURNAL_ISO.match(text)
        if m:
            try:
                ts = datetime.fromisoformat(m["iso"].replace("Z", "+00:00")).timestamp()
            except ValueError:
                ts = None
            ident = m["ident"]
            text = text[m.end():]
    if text[:1] in "[0123456789":
        m = _ISO_STAMP.match(text)
        if m:
            text = text[m.end():]
    m = _COMPOSE.match(text)
    if m and not _SGLANG.match(text):
        text = text[m.end():]
    if text.startswith("^C"):  # a terminal's echo of Ctrl-C, pasted with the line that followed it
        text = text[2:]
    body = tag + text if tag else text
    m = _SGLANG.match(text)
    if m:
        if m["gpu"] is not None:
            ranks = f"TP{m['gpu']}"
        else:
            ranks = m["ranks"].strip()
            if ts is None:
                ts = _sglang_ts(m, ref_year)
        rest = text[m.end():]
        lv = _UVICORN_LEVEL.match(rest)
        return CleanLine(text=rest, prefixed=True, body=body, level=lv["lvl"] if lv else "", ranks=ranks, ts=ts,
                         ident=ident)
    m = _VLLM.match(text)
    if m:
        if ts is None:
            ts = _vllm_ts(m["ts"], ref_year)
        return CleanLine(text=text[m.end():], prefixed=True, body=body, level=m["lvl"], ranks=m["proc"] or "", ts=ts,
                         ident=ident)
    proc = ""
    m = _VLLM_PROC_ONLY.match(text)
    if m:
        proc = m["proc"]
        text = text[m.end():]
    lv = _UVICORN_LEVEL.match(text)
    if lv:
        return CleanLine(text=text, prefixed=True, body=body, level=lv["lvl"], ranks=proc, ts=ts, ident=ident)
    return CleanLine(text=text, prefixed=False, body=body, ranks=proc, ts=ts, ident=ident)


@lru_cache(maxsize=64)
def _local_ts(text: str) -> float | None:
    """`YYYY-MM-DD HH:MM:SS` as local time. Cached: consecutive lines share their second, and strptime is most
    of the cost of cleaning a line."""
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        return None


def _sglang_ts(m: re.Match[str], ref_year: int) -> float | None:
    date = m["date"] or "01-01"
    t = _local_ts(f"{date if len(date) > 5 else f'{ref_year}-{date}'} {m['time']}")
    if t is None:
        return None
    return t + ((real_or_none(m["ms"], low=0.0, high=1.0, text=True) or 0.0) if m["ms"] else 0.0)


def _vllm_ts(s: str, ref_year: int) -> float | None:
    return _local_ts(f"{ref_year}-{s}")
