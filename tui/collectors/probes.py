"""HTTP probes of a server's endpoint: connect, /health, /v1/models and a real few-token generation; and, once a
run, the release it names (vLLM `/version`, SGLang `/server_info`), on the same client (the same port forward).

A `/v1/models` answer is recorded but never taken as readiness (after a restart the old process can still give
it); only a generation counts. Every answer is read within a limit (tui/collectors/bounded.py): whatever listens on
the port while the server is down is read too, and must not stream gigabytes into bringup. The client ignores proxy
variables: a proxy answering 502 for 127.0.0.1 is a classic way to fail a warmup (sglang #2468), and a probe must
not fall into it.

Every generation is a real one, counted by the server like any other: the prober keeps a ledger of them
(`ProbeTokens`: when each ran and how many tokens it got back), carried by its HTTP client, so that whatever reads
the server's own counts through that client (the engine scrapes /metrics on it) takes bringup's own tokens out.
An idle server that bringup probes is idle, not serving 4 tokens a second.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tui.collectors import server_http
from tui.collectors.bounded import fetch
from tui.collectors.shared_generations import SharedGenerations
from tui.guard.numbers import MAX_WHOLE, whole
from tui.model import ProbeResult, ReleaseReported

_SSL: ssl.SSLContext | None = None
#: a server's release text is kept to this many characters (the reducer takes none longer than 64)
_RELEASE_CHARS = 200


#: the generations kept for the questions of a figure per interval (was one under way then?): longer than any
#: interval between two readings of the server's figures
KEEP_S = 120.0


@dataclass(slots=True)
class ProbeGeneration:
    """One generation bringup asked of the server: when it was sent and answered, and its tokens (those asked for
    until the answer says how many came back; still those asked for when no answer said)."""

    began: float
    ended: float | None
    tokens: int
    #: of `tokens`, those already taken out of the server's counts
    taken: float = 0.0


class ProbeTokens:
    """The ledger of the prober's own generations: how many tokens of the server's counts are bringup's.

    Pure bookkeeping on the clock it is given. A reader of a counter of generated tokens takes out, at each
    reading, the tokens of the generations sent before the reading was asked for and not yet taken out (`take`):
    a server counts a generation's tokens as it makes them (SGLang's scheduler at every decode step, vLLM's at
    every step), so a generation answered before a reading is wholly in it and one under way partly; what is taken
    is never taken twice, and a generation answered before a reading is settled by it (a server that counts fewer
    tokens than the answer says, the first token as prefill's, owes nothing later). A reader of a figure per
    interval (a gauge, a log line) asks instead whether generations were under way (`in_flight`, `ran_between`)."""

    def __init__(self, shared: Path | None = None) -> None:
        self._gens: list[ProbeGeneration] = []
        #: the generations of bringup's other processes on the same deployment (tui/collectors/shared_generations.py)
        self._shared = SharedGenerations(shared, secrets.token_hex(6), keep_s=KEEP_S) if shared else None
        #: the latest reading that settled the generations answered before it: another process's generation
        #: answered before it is in that reading already, nothing of it left to take
        self._settled_at = -math.inf

    def _take_in_others(self) -> None:
        if self._shared is None:
            return
        news = self._shared.news()
        if not news:
            return
        # one answered before the latest settling reading is in that reading already: nothing of it left to take
        self._gens += [ProbeGeneration(o.began, o.ended, o.tokens, o.tokens if o.ended <= self._settled_at else 0.0)
                       for o in news]
        newest = max(o.ended for o in news)
        self._gens = [g for g in self._gens if g.ended is None or newest - g.ended < KEEP_S]

    def began(self, at: float, asked: int) -> ProbeGeneration:
        self._take_in_others()
        self._gens = [g for g in self._gens if g.ended is None or at - g.ended < KEEP_S]
        g = ProbeGeneration(at, None, max(0, asked))
        self._gens.append(g)
        return g

    def ended(self, g: ProbeGeneration, at: float, tokens: int | None) -> None:
        """The answer came (`tokens`: those it says it generated), or none did (None: the tokens asked for stay,
        the most it can have cost)."""
        g.ended = at
        if tokens is not None:
            g.tokens = max(0, tokens)
        if self._shared is not None:
            self._shared.append(g.began, at, g.tokens)

    def take(self, counted: float, asked_at: float, answered_at: float | None = None) -> float:
        """Of `counted` tokens a counter gained up to a reading asked for at `asked_at` and answered at
        `answered_at`, those that are bringup's own (at most `counted`). Returns them; the generations answered
        before the reading was asked for are settled. A generation sent while the reading was on its way may be
        partly in it (the engine sends its probe and its scrape on the same instants of its clock grid): it is
        taken as far as the count goes, and what is taken of it is not taken again, so over two readings the
        count is exact; never shown as the server's throughput."""
        self._take_in_others()
        until = asked_at if answered_at is None else max(asked_at, answered_at)
        taken = 0.0
        for g in self._gens:
            if g.began > until or counted - taken <= 0:
                continue
            due = g.tokens - g.taken
            if due > 0:
                part = min(due, counted - taken)
                g.taken += part
                taken += part
        self.settle(asked_at)
        return taken

    def settle(self, asked_at: float) -> None:
        """A reading asked for at `asked_at` holds all the tokens of the generations answered before it: nothing
        more of theirs is to come (a first reading, the base of the next; or a counter started again)."""
        self._take_in_others()
        self._settled_at = max(self._settled_at, asked_at)
        for g in self._gens:
            if g.ended is not None and g.ended <= asked_at:
                g.taken = max(g.taken, g.tokens)

    def in_flight(self, start: float, end: float) -> int:
        """How many generations were under way at some moment of [start, end]."""
        self._take_in_others()
        return sum(1 for g in self._gens if g.began <= end and (g.ended is None or g.ended >= start))

    def ran_between(self, start: float, end: float) -> bool:
        return self.in_flight(start, end) > 0


class ProbeClient(httpx.AsyncClient):
    """The prober's HTTP client, carrying the prober's ledger (`probe_tokens`): the server's counts read through it
    are read by whoever knows which of them are bringup's own."""

    def __init__(self, *args: Any, probe_tokens: ProbeTokens, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.probe_tokens = probe_tokens


def probe_tokens_of(client: httpx.AsyncClient) -> ProbeTokens | None:
    """The ledger of the prober whose client this is; None for any other client."""
    return client.probe_tokens if isinstance(client, ProbeClient) else None


def error_words(e: BaseException, timeout: float | None = None) -> str:
    """An exception of a request or a connection in words a user reads: its message, never its class name."""
    if isinstance(e, TimeoutError | httpx.TimeoutException):
        return f"no answer within {timeout:g} s" if timeout is not None else "no answer in time"
    text = str(e).strip()
    if isinstance(e, OSError) and e.strerror:
        text = e.strerror
    if text:
        return text
    if isinstance(e, httpx.ConnectError | ConnectionError):
        return "cannot connect"
    if isinstance(e, httpx.RemoteProtocolError):
        return "the server closed the connection without an answer"
    return "the request failed"


def _ssl_context(endpoint: str) -> ssl.SSLContext:
    """One TLS context for every prober of an https endpoint: httpx loads the CA bundle for each client otherwise
    (about 30 ms of CPU each, 32 times over for a fleet of 16). An http endpoint, the usual one (a server on the
    host or behind an SSH forward), never opens TLS: its client gets a context that trusts no authority, so that a
    TLS connection through it would fail, never pass unverified, and the console does not hold the system's
    certificates (1.7 MiB parsed) for a connection it never makes."""
    global _SSL
    if not endpoint.lower().startswith("https:"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, against no authority: fails closed
    if _SSL is None:
        _SSL = ssl.create_default_context()
    return _SSL


class Prober:
    def __init__(self, endpoint: str, *, timeout: float = 5.0, tokens: int = 4, health_path: str = "/health",
                 models_path: str = "/v1/models", generations_file: Path | None = None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.tokens = tokens
        self.health_path = health_path
        self.models_path = models_path
        self.model_id: str | None = None
        #: every generation this prober asked of the server, for the throughput reader to take out, and (through
        #: `generations_file`) those bringup's other processes asked of it
        self.generated = ProbeTokens(generations_file)
        self.client = ProbeClient(base_url=self.endpoint, trust_env=False, verify=_ssl_context(self.endpoint),
                                  timeout=httpx.Timeout(timeout, connect=min(1.0, timeout)),
                                  limits=server_http.limits(), probe_tokens=self.generated)

    async def close(self) -> None:
        await self.client.aclose()

    def _result(self, kind: str, t0: float, ok: bool, status: int | None = None, detail: str = "") -> ProbeResult:
        return ProbeResult(at=time.time(), kind=kind, ok=ok, status=status, detail=detail[:300],
                           latency_s=time.monotonic() - t0)

    async def connect(self) -> ProbeResult:
        u = urlsplit(self.endpoint)
        port = u.port or (443 if u.scheme == "https" else 80)
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(min(1.0, self.timeout)):
                _, w = await asyncio.open_connection(u.hostname or "127.0.0.1", port)
            w.close()
            return self._result("connect", t0, True)
        except TimeoutError:
            return self._result("connect", t0, False, detail=f"connect: no answer within {min(1.0, self.timeout):g} s")
        except OSError as e:
            return self._result("connect", t0, False, detail=f"refused: {error_words(e)}" if str(e) else "refused")

    async def _get(self, kind: str, path: str) -> tuple[ProbeResult, Any]:
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                r = await fetch(self.client, "GET", path)
        except (httpx.HTTPError, TimeoutError) as e:
            return self._result(kind, t0, False, detail=error_words(e, self.timeout)), None
        body: Any = None
        try:
            body = r.json()
        except ValueError:
            body = None
        return self._result(kind, t0, r.status_code == 200, r.status_code, r.text[:200]), body

    async def health(self) -> ProbeResult:
        return (await self._get("health", self.health_path))[0]

    async def release(self, paths: Sequence[str], key: str, invocation: str) -> ReleaseReported | ProbeResult:
        """The release the server names at the first of `paths` it serves (the next is tried only after a 404 or
        405: a route its release lacks), under `key` of the JSON answer: the event for the run `invocation` it was
        asked of, or the failed probe (kind `release`) that says why not: no answer (`status` None), or one without
        a release. The text is the server's as sent, cut short; the reducer decides whether it is a release."""
        res = ProbeResult(time.time(), "release", False, detail="no route to ask")
        for path in paths:
            res, body = await self._get("release", path)
            if res.status in (404, 405):
                continue
            value = body.get(key) if res.ok and isinstance(body, dict) else None
            if isinstance(value, str):
                return ReleaseReported(at=res.at, version=value[:_RELEASE_CHARS], path=path, invocation=invocation,
                                       latency_s=res.latency_s)
            if res.ok:
                return replace(res, ok=False, detail=f"{path}: no {key!r} in the answer")
            return res
        return res

    async def models(self) -> ProbeResult:
        res, body = await self._get("models", self.models_path)
        if res.ok:
            try:
                self.model_id = str(body["data"][0]["id"])
            except (KeyError, IndexError, TypeError):
                return ProbeResult(res.at, "models", False, res.status, "not an OpenAI-compatible /v1/models",
                                   res.latency_s)
        return res

    async def generate(self) -> ProbeResult:
        """A real completion of a few tokens: the only probe that proves the serving path works."""
        if self.model_id is None:
            m = await self.models()
            if not m.ok:
                return ProbeResult(m.at, "generate", False, m.status, f"no model list: {m.detail}", m.latency_s)
        t0 = time.monotonic()
        payload = {"model": self.model_id, "prompt": "Say OK.", "max_tokens": self.tokens, "temperature": 0}
        # in the ledger before it is sent: the server may count its tokens before its answer is read
        gen = self.generated.began(time.time(), self.tokens)
        # a generation left without its answer (no answer in time, or the command exited meanwhile: `status` ends,
        # a console quits) goes on in the server, which neither knows nor cares that no one reads it: it counts in
        # the ledger, and in the file bringup's other processes read, as under way for as long again as it was
        # given. A cancelled one that was never recorded was read back by the next exporter as the server's work.
        try:
            async with asyncio.timeout(self.timeout * 4):
                r = await fetch(self.client, "POST", "/v1/completions", json=payload)
        except (httpx.HTTPError, TimeoutError) as e:
            unsent = isinstance(e, httpx.ConnectError | httpx.ConnectTimeout)  # the server never had it
            self.generated.ended(gen, time.time() + (0 if unsent else self.timeout * 4), None)
            return self._result("generate", t0, False, detail=error_words(e, self.timeout * 4))
        except asyncio.CancelledError:
            self.generated.ended(gen, time.time() + self.timeout * 4, None)
            raise
        if r.status_code != 200:
            self.generated.ended(gen, time.time(), 0)
            if r.status_code == 404:
                self.model_id = None
            return self._result("generate", t0, False, r.status_code, r.text[:200])
        try:
            body = r.json()
            text = body["choices"][0].get("text", "")
            n = whole((body.get("usage") or {}).get("completion_tokens") or 0, "completion_tokens", low=0,
                      high=MAX_WHOLE)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            self.generated.ended(gen, time.time(), None)
            return self._result("generate", t0, False, r.status_code, "reply is not an OpenAI completion")
        # the answer's own count; a server that gives none: the tokens asked for, the most it can have made
        self.generated.ended(gen, time.time(), n if n > 0 else None)
        ok = bool(text) or n > 0
        from tui.words import plural  # "1 token", never "1 tokens"

        return self._result("generate", t0, ok, r.status_code, plural(n, "token") if ok else "empty completion")
