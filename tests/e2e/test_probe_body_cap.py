"""Answers are read within a limit (issue 29.9): whatever listens on a server's port while the server is down (any
local user can bind it) streams without end into bringup's probes, its /metrics scrape and the benchmark's model
list and streams; each stops at its limit with a message that says so, and the process's memory stays bounded.

The endless server is a real HTTP server on loopback (stdlib, a thread), writing until the client goes away."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.helpers.ports import free_port
from tests.helpers.wait import slack
from tui.collectors.bounded import BODY_MAX, METRICS_MAX, BodyTooLarge, fetch
from tui.collectors.probes import Prober
from tui.engine.throughput import ThroughputTracker
from tui.lifecycle.presets import get_preset
from tui.ops.bench import discover_model, one_request

ROOT = Path(__file__).resolve().parents[2]
CHUNK = b"x" * 65536


class Endless(BaseHTTPRequestHandler):
    """200 with a body that never ends (no length: it ends when the connection does); `/sse` a stream whose one
    line never ends; `/length` a body whose declared length is 5 GiB. Counts the bytes it sent."""

    sent = 0
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self.send_response(200)
        sse = self.path.startswith("/v1/chat")
        self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
        if self.path == "/length":
            self.send_header("Content-Length", str(5 << 30))
        self.end_headers()
        try:
            if sse:
                self.wfile.write(b"data: {\"choices\": [{\"delta\": {\"content\": \"")
            while True:
                self.wfile.write(CHUNK)
                type(self).sent += len(CHUNK)
        except OSError:
            return


@pytest.fixture
def endless() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), Endless)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_every_probe_stops_at_the_limit_with_a_clear_message(endless: str) -> None:
    async def go() -> None:
        p = Prober(endless, timeout=20.0)
        try:
            for res in (await p.health(), await p.models()):
                assert not res.ok and "1 MiB" in res.detail and "not the server's answer" in res.detail, res
                assert res.latency_s < 10, res  # stopped at the limit, not at the timeout
            p.model_id = "m"
            gen = await p.generate()
            assert not gen.ok and "1 MiB" in gen.detail, gen
            rel = await p.release(["/version"], "version", "inv")
            assert not getattr(rel, "ok", True) and "1 MiB" in getattr(rel, "detail", ""), rel
        finally:
            await p.close()
    asyncio.run(go())


def test_a_declared_length_past_the_limit_is_not_read_at_all(endless: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(base_url=endless, trust_env=False) as c:
            with pytest.raises(BodyTooLarge, match=r"5120 MiB"):
                await fetch(c, "GET", "/length")
    asyncio.run(go())


def test_metrics_scrape_bench_models_and_an_endless_stream_line(endless: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(base_url=endless, trust_env=False, timeout=20.0) as c:
            with pytest.raises(BodyTooLarge, match=f"{METRICS_MAX >> 20} MiB"):
                await ThroughputTracker(get_preset("sglang")).scrape(c, 20.0)
            with pytest.raises(Exception, match="1 MiB"):
                await discover_model(c)
            r = await one_request(c, "m", "hi", 4, 20.0)
            assert not r.ok and "1 MiB" in r.error, r
    asyncio.run(go())


CHILD = """
import asyncio, json, resource, sys
from tui.collectors.probes import Prober
async def go():
    p = Prober(sys.argv[1], timeout=8.0)
    out = [(await p.health()).detail, (await p.models()).detail]
    await p.close()
    return out
details = asyncio.run(go())
print(json.dumps({"details": details, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def test_memory_stays_bounded_against_an_endless_answer(endless: str) -> None:
    """In a fresh process: its peak RSS with two probes against the endless server stays near an idle one's."""
    base = subprocess.run([sys.executable, "-c", CHILD.replace("details = asyncio.run(go())", "details = []"),
                           endless], cwd=ROOT, capture_output=True, text=True, timeout=slack(60))
    r = subprocess.run([sys.executable, "-c", CHILD, endless], cwd=ROOT, capture_output=True, text=True,
                       timeout=slack(60))
    assert r.returncode == 0 and base.returncode == 0, r.stderr + base.stderr
    got, idle = json.loads(r.stdout), json.loads(base.stdout)
    assert all("1 MiB" in d for d in got["details"]), got
    grew_mib = (got["maxrss_kib"] - idle["maxrss_kib"]) / 1024
    print(f"peak RSS {got['maxrss_kib'] / 1024:.0f} MiB, idle {idle['maxrss_kib'] / 1024:.0f} MiB")
    assert grew_mib < 32 + 2 * BODY_MAX / (1 << 20), (got, idle)
