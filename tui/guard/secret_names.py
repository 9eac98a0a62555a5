"""The rule on a name for secret flag values: which flag or variable holds a secret, and its value as `***` in a
command line, a flags mapping or a line of words. Pure (no I/O, no state): the domain (`tui/lifecycle/secrets.py`
re-exports it) and the redactor of every output (`redact.py`) share it.

A server's command line can carry a secret: SGLang's `--api-key` and `--admin-api-key` (0.5.10 on), its
`--ssl-keyfile-password`, vLLM's `--api-key` and `--hf-token` (the facts in presets/facts/*.json list them), and a
container's `HF_TOKEN=...`.

Why a rule on the name's words and not a list: a release adds secrets under new names (`--admin-api-key` came in
SGLang 0.5.10); a substring rule is too wide (`--max-total-tokens`, `--tokenizer`, `--ssl-keyfile` (a path), and
`--kt-max-deferred-experts-per-token` (a number) all contain `token` or `key`). A name is secret when its last
word is a secret's noun (`key`, `token`, `secret`, `password`, `passwd`, `passphrase`, `credential(s)`, `auth`)
and no word makes it a count, a size or a switch (`max`, `num`, `per`, `allow`, ...): `--allow-credentials` is a
switch, `--hf-token` a secret.

Limits: a secret inside another flag's value (a JSON `--kv-transfer-config` with a password in it) is not found by
name (the book of known values in `redact.py` finds it once the value is known); a value that starts with `-` after
a separate `--api-key` is not taken as its value (argparse does not take it either). Redaction is for what is shown
and recorded, never for what is run: the argv bringup writes and starts is the real one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

V = TypeVar("V")

#: what a secret's value becomes
REDACTED = "***"

#: the last word of a secret's name
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "passphrase", "credential",
                           "credentials", "auth"})
#: words that make a name a count, a size, a time or a switch, never a secret (`--max-prefill-tokens` ends in
#: `tokens` already; `--kt-max-deferred-experts-per-token` and `--bucket-time-to-first-token` end in `token`;
#: `--allow-credentials` is a switch)
_NOT_SECRET_WORDS = frozenset({"max", "min", "num", "per", "size", "first", "bucket", "allow", "enable", "disable",
                               "use", "no"})
#: `NAME=VALUE` as an environment entry (`-e HF_TOKEN=...`, `env HF_TOKEN=... python ...`)
_ENV_ENTRY = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.S)
#: `NAME=VALUE` in a line of text: an environment variable's spelling only (`HF_TOKEN=hf_...`), so that a
#: server's `api_key=None` is left as it is
_ENV_IN_TEXT = re.compile(r"(?<![\w-])(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>[^\s'\"]+)")
#: a secret in a server's own words: SGLang's `ServerArgs(api_key='...')`, vLLM's `{'api_key': '...'}`
_QUOTED = re.compile(r"""(?P<name>\b[A-Za-z][A-Za-z0-9_-]*)(?P<sep>'?\s*[:=]\s*)(?P<q>['"])(?P<value>[^'"]*)(?P=q)""")


def is_secret(name: str) -> bool:
    """Whether a flag (`--api-key`, `api_key`) or an environment variable (`HF_TOKEN`) holds a secret."""
    words = [w for w in name.strip().lstrip("-").lower().replace("_", "-").split("-") if w]
    if not words or words[-1] not in _SECRET_WORDS:
        return False
    return not any(w in _NOT_SECRET_WORDS for w in words)


def redact_argv(argv: Sequence[str], also: frozenset[str] = frozenset()) -> list[str]:
    """The command line with every secret's value `***`: `--api-key V`, `--api-key=V`, `HF_TOKEN=V`; `also`: more
    flag names (dashes and all, `--served-model-name`) to take as secret, the ones a config declares."""
    return _redact(argv, env=True, also=also)


def _redact(argv: Sequence[str], *, env: bool, also: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next and not a.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if a.startswith("-"):
            name, eq, _ = a.partition("=")
            if is_secret(name) or name in also:
                if eq:
                    out.append(f"{name}={REDACTED}")
                    continue
                hide_next = True
            out.append(a)
            continue
        m = _ENV_ENTRY.match(a) if env else None
        out.append(f"{m['name']}={REDACTED}" if m and is_secret(m["name"]) else a)
    return out


def redact_flags(flags: Mapping[str, V], also: frozenset[str] = frozenset()) -> dict[str, V | str]:
    """A flags mapping (name without dashes -> value, None for an unset flag or a switch) with every secret's value
    `***`; `also`: more flag names (`--served-model-name`) to take as secret."""
    return {k: (REDACTED if v is not None and (is_secret(k) or "--" + k.lstrip("-") in also) else v)
            for k, v in flags.items()}


def redact_text(text: str) -> str:
    """A line of words (a command line joined, a flag change `~ --api-key A -> B`, a server's log line naming
    `api_key='...'`) with every secret's value `***`. Words are split on spaces and put back as they were."""
    words = text.split(" ")
    red = _redact(words, env=False)
    for i in range(len(words) - 2):  # a change's new value: `--api-key A -> B`
        if red[i] == REDACTED and red[i] != words[i] and words[i + 1] == "->":
            red[i + 2] = REDACTED
    out = _ENV_IN_TEXT.sub(lambda m: f"{m['name']}={REDACTED}" if is_secret(m["name"]) else m[0], " ".join(red))

    def quoted(m: re.Match[str]) -> str:
        if not is_secret(m["name"]) or not m["value"]:
            return m[0]
        return f"{m['name']}{m['sep']}{m['q']}{REDACTED}{m['q']}"
    return _QUOTED.sub(quoted, out)


def secret_values(argv: Sequence[str], also: frozenset[str] = frozenset()) -> dict[str, str]:
    """The secrets a command line gives, by name: `--api-key V`, `--api-key=V`, `HF_TOKEN=V`; `also`: more flag
    names (dashes and all, `--served-model-name`) to take as secret, the ones a config declares."""
    known: dict[str, str] = {}
    for i, a in enumerate(argv):
        name, eq, value = a.partition("=")
        if a.startswith("-") and (is_secret(name) or name in also):
            if eq:
                known[name] = value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                known[name] = argv[i + 1]
        elif (m := _ENV_ENTRY.match(a)) and is_secret(m["name"]):
            known[m["name"]] = m["value"]
    return known


def unredact_argv(recorded: Sequence[str], live: Sequence[str]) -> list[str]:
    """A recorded (redacted) command line with each `***` value put back from `live`, the command line the server
    runs now: a resumed sweep restores the original flags from its `sweep.json`, which holds no secret. Any flag's
    `***` is put back, not only one a name says is secret: the redactor also hides the values of flags a config
    declares secret, and values it knows by value (tui/guard/redact.py). Raises ValueError naming the flag when
    `live` does not have it (the real value is nowhere to be had)."""
    known = {**_flag_values(live), **secret_values(live)}
    out = list(recorded)
    for i, a in enumerate(out):
        name, eq, value = a.partition("=")
        if eq and value == REDACTED and (a.startswith("-") or is_secret(name)):
            out[i] = f"{name}={_known(known, name)}"
        elif a == REDACTED and i > 0 and out[i - 1].startswith("-"):
            out[i] = _known(known, out[i - 1])
    return out


def _flag_values(argv: Sequence[str]) -> dict[str, str]:
    """Every option's value in a command line: `--x V` and `--x=V`."""
    known: dict[str, str] = {}
    for i, a in enumerate(argv):
        if not a.startswith("-"):
            continue
        name, eq, value = a.partition("=")
        if eq:
            known[name] = value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            known[name] = argv[i + 1]
    return known


def _known(known: Mapping[str, str], name: str) -> str:
    if name not in known:
        raise ValueError(f"the value of {name} is not recorded (secrets never are) and the server runs without it "
                         "now: set it again by hand")
    return known[name]
