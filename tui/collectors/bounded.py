"""HTTP answers read with a ceiling (issue 29.9): whatever listens on a server's port is read by bringup, and while
the server is down any local user can bind that port and stream gigabytes into a probe (2.26 GB of RSS was seen).

Every answer bringup reads from a server (the probes, the model list, the release, the /metrics scrape, the
benchmark's model list and error bodies) goes through `fetch`, which streams the body and stops at a limit with
`BodyTooLarge`, an `httpx.HTTPError`: the callers already handle those as "no answer", and its message says what
happened in words. The limits:

- `BODY_MAX`, 1 MiB, for the JSON answers (`/health`, `/v1/models`, `/version`, `/server_info`, a 4-token
  completion): real ones are a few hundred bytes to a few KiB (a model list of hundreds of LoRA adapters stays
  well under 1 MiB).
- `METRICS_MAX`, 8 MiB, for a /metrics page: a real vLLM page with every histogram over several models and LoRA
  adapters is a few hundred KiB; SGLang's with DP attention's per-group series tens of KiB (the fixtures in
  tests/fixtures/metrics are 10-16 KiB). 8 MiB is 10-20 times the largest real page and still a bounded cost.
- `LINE_MAX`, 1 MiB, for one line of a streamed (SSE) answer: a chunk of a completion is a few hundred bytes.

The limit counts decoded bytes; a compressed body is decoded one received chunk at a time, so the most held at once
is the limit plus one decoded chunk.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from tui.guard.numbers import whole_or_none

BODY_MAX = 1 << 20
METRICS_MAX = 8 << 20
LINE_MAX = 1 << 20
#: the ends of a line as httpx's `aiter_lines` takes them (not str.splitlines's U+2028, which JSON may hold as is)
_EOL = re.compile(r"\r\n|\r|\n")


class BodyTooLarge(httpx.HTTPError):
    """An answer longer than bringup reads from a server: not a server's answer, or a broken one."""

    def __init__(self, message: str, *, request: httpx.Request) -> None:
        super().__init__(message)
        self.request = request


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


@dataclass(frozen=True, slots=True)
class Body:
    """A whole answer, read within its limit."""

    status_code: int
    content: bytes
    encoding: str = "utf-8"

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding, "replace")

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not (a JSON nested too deep for Python included)."""
        try:
            return json.loads(self.content)
        except RecursionError:
            raise ValueError("JSON nested too deep") from None


async def read_capped(r: httpx.Response, limit: int) -> bytes:
    """The body of a streamed response, raising BodyTooLarge once it passes `limit` bytes (nothing more is read)."""
    # digits only (tui/guard/numbers.py): `str.isdigit` also takes "²", which int() then refuses
    declared = whole_or_none(r.headers.get("content-length", ""), low=0, text=True)
    if declared is not None and declared > limit:
        raise BodyTooLarge(f"the answer is {_mib(declared)} long, more than the {_mib(limit)} bringup reads "
                           f"from {r.request.url.path}: not the server's answer?", request=r.request)
    chunks: list[bytes] = []
    n = 0
    async for chunk in r.aiter_bytes():
        n += len(chunk)
        if n > limit:
            raise BodyTooLarge(f"the answer passed {_mib(limit)}, the most bringup reads from {r.request.url.path}: "
                               "not the server's answer?", request=r.request)
        chunks.append(chunk)
    return b"".join(chunks)


async def fetch(client: httpx.AsyncClient, method: str, url: str, *, limit: int = BODY_MAX, **kwargs: Any) -> Body:
    """One request whose answer is read whole, up to `limit` bytes (BodyTooLarge past it)."""
    async with client.stream(method, url, **kwargs) as r:
        content = await read_capped(r, limit)
        return Body(r.status_code, content, r.encoding or "utf-8")


async def capped_lines(r: httpx.Response, limit: int = LINE_MAX) -> AsyncIterator[str]:
    """The lines of a streamed answer (an SSE stream), BodyTooLarge for a line longer than `limit` characters:
    httpx's own `aiter_lines` holds a line without end whole."""
    pending = ""
    async for text in r.aiter_text():
        *lines, pending = _EOL.split(pending + text)
        for line in lines:
            yield line
        if len(pending) > limit:
            raise BodyTooLarge(f"a line of the answer passed {_mib(limit)}, the most bringup reads of one line from "
                               f"{r.request.url.path}", request=r.request)
    if pending:
        yield pending
