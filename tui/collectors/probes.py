"""HTTP probes of a server's endpoint: connect, /health, /v1/models and a real few-token generation; and, once a
run, the release it names (vLLM `/version`, SGLang `/server_info`), on the same client (the same port forward).

A `/v1/models` answer is recorded but never taken as readiness (after a restart the old process can still give
it); only a generation counts. The client ignores proxy variables: a proxy answering 502 for 127.0.0.1 is a
classic way to fail a warmup (sglang #2468), and a probe must not fall into it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from tui.model import ProbeResult, ReleaseReported

_SSL: ssl.SSLContext | None = None
#: a server's release text is kept to this many characters (the reducer takes none longer than 64)
_RELEASE_CHARS = 200


def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every prober: httpx loads the CA bundle for each client otherwise (about 30 ms of CPU
    each, 32 times over for a fleet of 16)."""
    global _SSL
    if _SSL is None:
        _SSL = ssl.create_default_context()
    return _SSL


class Prober:
    def __init__(self, endpoint: str, *, timeout: float = 5.0, tokens: int = 4, health_path: str = "/health",
                 models_path: str = "/v1/models") -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.tokens = tokens
        self.health_path = health_path
        self.models_path = models_path
        self.model_id: str | None = None
        self.client = httpx.AsyncClient(base_url=self.endpoint, trust_env=False, verify=_ssl_context(),
                                        timeout=httpx.Timeout(timeout, connect=min(1.0, timeout)))

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
        except (OSError, TimeoutError) as e:
            return self._result("connect", t0, False, detail=f"{type(e).__name__}: {e}" if str(e) else "refused")

    async def _get(self, kind: str, path: str) -> tuple[ProbeResult, Any]:
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                r = await self.client.get(path)
        except (httpx.HTTPError, TimeoutError) as e:
            return self._result(kind, t0, False, detail=f"{type(e).__name__}: {e}"), None
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
        try:
            async with asyncio.timeout(self.timeout * 4):
                r = await self.client.post("/v1/completions", json=payload)
        except (httpx.HTTPError, TimeoutError) as e:
            return self._result("generate", t0, False, detail=f"{type(e).__name__}: {e}")
        if r.status_code != 200:
            if r.status_code == 404:
                self.model_id = None
            return self._result("generate", t0, False, r.status_code, r.text[:200])
        try:
            body = r.json()
            text = body["choices"][0].get("text", "")
            n = int((body.get("usage") or {}).get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return self._result("generate", t0, False, r.status_code, "reply is not an OpenAI completion")
        ok = bool(text) or n > 0
        return self._result("generate", t0, ok, r.status_code, f"{n} tokens" if ok else "empty completion")
