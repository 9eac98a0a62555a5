"""`bringup bench`: what a user gets from an OpenAI-compatible endpoint, measured with real streaming requests.

Per concurrency level it runs `requests` chat completions (`concurrency` at a time, streamed over SSE) and reports
time to first token, tokens/s per stream (decode speed after the first token) and aggregate tokens/s (all tokens
over the wall time of the level). Completion tokens come from the server's `usage` when it sends one (asked for
with `stream_options.include_usage`), else from the number of content chunks. It never runs on its own: only
this command sends load.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass, field

import httpx

from tui.collectors import server_http
from tui.collectors.bounded import BODY_MAX, capped_lines, fetch, read_capped
from tui.guard.numbers import MAX_WHOLE, whole_or_none
from tui.words import plural

#: the most streams at once that bringup's benchmark client drives, for `bringup bench --concurrency` and a sweep's
#: `matrix.concurrency` alike (one rule, one place). Why a limit: the client is one Python process, one event loop
#: parsing every stream and one open connection (a file descriptor) per stream, and a common soft limit on open
#: files is 1024; past that the latencies measured are the client's own queueing, not the server's, and a typo
#: (`100000`) would open that many connections before the first figure came back.
MAX_CONCURRENCY = 1024


class BenchError(Exception):
    """The endpoint cannot be benchmarked; the message says why in one line."""


@dataclass
class RequestResult:
    ok: bool
    ttft_s: float | None = None
    total_s: float = 0.0
    tokens: int = 0
    error: str = ""
    #: arrival of each content chunk, seconds after the request was sent (ITL is the gaps between them)
    chunk_s: list[float] = field(default_factory=list)

    @property
    def stream_tps(self) -> float | None:
        if not self.ok or self.ttft_s is None or self.tokens < 2:
            return None
        decode = self.total_s - self.ttft_s
        return (self.tokens - 1) / decode if decode > 0 else None


@dataclass
class LevelResult:
    concurrency: int
    requests: int
    ok: int
    wall_s: float
    aggregate_tps: float
    stream_tps_mean: float | None
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    errors: list[str] = field(default_factory=list)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[k]


async def discover_model(client: httpx.AsyncClient) -> str:
    try:
        r = await fetch(client, "GET", "/v1/models")  # within BODY_MAX: whatever listens there is read
    except httpx.ConnectError:
        raise BenchError(f"cannot connect to {client.base_url} (is the server up? `bringup status`)") from None
    except httpx.HTTPError as e:
        raise BenchError(f"{client.base_url}: {type(e).__name__}: {e}") from None
    if r.status_code != 200:
        raise BenchError(f"{client.base_url}/v1/models answered {r.status_code}: not an OpenAI-compatible server "
                         "(or not ready yet)")
    try:
        return str(r.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise BenchError(f"{client.base_url}/v1/models is not an OpenAI model list") from None


async def one_request(client: httpx.AsyncClient, model: str, prompt: str, max_tokens: int,
                      timeout: float) -> RequestResult:
    payload = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
               "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first: float | None = None
    chunks = 0
    arrivals: list[float] = []
    usage_tokens = 0
    try:
        async with asyncio.timeout(timeout), client.stream("POST", "/v1/chat/completions", json=payload) as r:
            if r.status_code != 200:
                body = (await read_capped(r, BODY_MAX)).decode("utf-8", "replace")[:200]
                return RequestResult(False, error=f"HTTP {r.status_code}: {body}")
            async for line in capped_lines(r):  # a line without end is not held whole
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    obj = json.loads(data)
                except ValueError:
                    continue
                usage = obj.get("usage") or {}
                if n := whole_or_none(usage.get("completion_tokens"), low=0, high=MAX_WHOLE):  # tui/guard/numbers.py
                    usage_tokens = n
                for ch in obj.get("choices") or []:
                    delta = ch.get("delta") or {}
                    if delta.get("content") or delta.get("reasoning_content"):
                        chunks += 1
                        arrivals.append(time.perf_counter() - t0)
                        if first is None:
                            first = arrivals[-1]
    except TimeoutError:
        return RequestResult(False, error=f"no complete answer within {timeout:g} s")
    except httpx.HTTPError as e:
        return RequestResult(False, error=f"{type(e).__name__}: {e}")
    total = time.perf_counter() - t0
    tokens = usage_tokens or chunks
    if tokens == 0:
        return RequestResult(False, total_s=total, error="the stream carried no tokens", chunk_s=arrivals)
    return RequestResult(True, first, total, tokens, chunk_s=arrivals)


async def run_level(client: httpx.AsyncClient, model: str, concurrency: int, requests: int, prompt: str,
                    max_tokens: int, timeout: float) -> LevelResult:
    sem = asyncio.Semaphore(concurrency)

    async def guarded() -> RequestResult:
        async with sem:
            return await one_request(client, model, prompt, max_tokens, timeout)

    t0 = time.perf_counter()
    results = await asyncio.gather(*(guarded() for _ in range(requests)))
    wall = time.perf_counter() - t0
    ok = [r for r in results if r.ok]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    stream = [x for x in (r.stream_tps for r in ok) if x is not None]
    return LevelResult(
        concurrency=concurrency, requests=requests, ok=len(ok), wall_s=round(wall, 3),
        aggregate_tps=round(sum(r.tokens for r in ok) / wall, 2) if wall > 0 else 0.0,
        stream_tps_mean=round(statistics.fmean(stream), 2) if stream else None,
        ttft_p50_s=_pct(ttfts, 0.5), ttft_p90_s=_pct(ttfts, 0.9),
        errors=sorted({r.error for r in results if not r.ok})[:5])


async def bench(endpoint: str, concurrency: list[int], *, requests: int | None = None, prompt_tokens: int = 128,
                max_tokens: int = 128, timeout: float = 120.0) -> dict[str, object]:
    prompt = "Summarise the following text in one paragraph. " + " ".join(["token"] * max(1, prompt_tokens - 9))
    async with httpx.AsyncClient(base_url=endpoint, trust_env=False, limits=server_http.limits(max(concurrency) + 4),
                                 timeout=httpx.Timeout(timeout, connect=3.0)) as client:
        model = await discover_model(client)
        levels = []
        for c in concurrency:
            levels.append(await run_level(client, model, c, requests or max(4, 2 * c), prompt, max_tokens,
                                          timeout))
    if not any(lv.ok for lv in levels):
        errs = {e for lv in levels for e in lv.errors}
        raise BenchError("every request failed: " + "; ".join(sorted(errs))[:300])
    return {"endpoint": endpoint, "model": model, "prompt_tokens": prompt_tokens, "max_tokens": max_tokens,
            "levels": [asdict(lv) for lv in levels]}


def render(result: dict[str, object]) -> str:
    def count(v: object, word: str) -> str:
        return plural(v, word) if isinstance(v, int) else f"{v} {word}s"

    lines = [f"{result['model']} at {result['endpoint']}  (prompt ~{count(result['prompt_tokens'], 'token')}, "
             f"max {count(result['max_tokens'], 'new token')})",
             f"{'conc':>5} {'ok':>7} {'agg tok/s':>10} {'stream tok/s':>13} {'TTFT p50':>9} {'TTFT p90':>9}"]
    for lv in result["levels"]:  # type: ignore[attr-defined]
        def s(v: float | None, fmt: str) -> str:
            return "-" if v is None else format(v, fmt)
        lines.append(f"{lv['concurrency']:>5} {lv['ok']:>3}/{lv['requests']:<3} {lv['aggregate_tps']:>10.1f} "
                     f"{s(lv['stream_tps_mean'], '.1f'):>13} {s(lv['ttft_p50_s'], '.3f'):>8}s "
                     f"{s(lv['ttft_p90_s'], '.3f'):>8}s")
        for e in lv["errors"]:
            lines.append(f"      error: {e}")
    return "\n".join(lines)
