"""The server's release, known from what the server says, per run: vLLM's start-up lines, the HTTP answer (SGLang's
`/server_info`, vLLM's `/version`), never a guess; and shown (`status`, `status --json`, the console's header).

The log lines below are rendered from the releases' own format strings, copied from the released wheels (each
named with its release and file), behind the logger prefix vLLM writes (`vllm/logger.py` `_FORMAT`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.reducer_events import SGLANG
from tests.helpers.wait import until_async
from tui.collectors.probes import Prober
from tui.config.settings import load
from tui.engine import Engine, ProbeAnswered
from tui.lifecycle.presets.facts import resolve
from tui.model import (
    ProbeResult,
    ReleaseReported,
    ReleaseSource,
)

# ---------------------------------------------------------------- the HTTP answer, tied to its run


async def test_the_prober_asks_the_next_route_only_after_a_404() -> None:
    """SGLang 0.4.10 and 0.5.5 serve `/get_server_info` only; from 0.5.10 `/server_info` (and the old one, which
    logs a deprecation warning at each call): the first route answers, or the second after a 404."""
    asked: list[str] = []

    def serve(routes: dict[str, tuple[int, Any]]) -> Callable[[httpx.Request], httpx.Response]:
        def handler(request: httpx.Request) -> httpx.Response:
            asked.append(request.url.path)
            code, body = routes.get(request.url.path, (404, {"detail": "Not Found"}))
            return httpx.Response(code, json=body)
        return handler

    async def ask(routes: dict[str, tuple[int, Any]]) -> ReleaseReported | ProbeResult:
        p = Prober("http://127.0.0.1:1")
        await p.client.aclose()
        p.client = httpx.AsyncClient(base_url=p.endpoint, transport=httpx.MockTransport(serve(routes)))
        try:
            return await p.release(SGLANG.version_paths, SGLANG.version_key, "run-1")
        finally:
            await p.close()

    old = await ask({"/get_server_info": (200, {"tp_size": 8, "version": "0.5.5"})})
    assert isinstance(old, ReleaseReported) and (old.version, old.path, old.invocation) == (
        "0.5.5", "/get_server_info", "run-1")
    assert asked == ["/server_info", "/get_server_info"]
    asked.clear()
    new = await ask({"/server_info": (200, {"version": "0.5.23"}), "/get_server_info": (200, {"version": "x"})})
    assert isinstance(new, ReleaseReported) and new.version == "0.5.23" and asked == ["/server_info"]
    without = await ask({"/server_info": (200, {"tp_size": 8})})
    assert isinstance(without, ProbeResult) and not without.ok and without.status == 200
    busy = await ask({"/server_info": (503, {"detail": "starting"})})
    assert isinstance(busy, ProbeResult) and busy.status == 503


# ---------------------------------------------------------------- end to end, with the simulated server


@pytest.mark.slow
def test_status_json_shows_the_release_the_server_names(make_bringup: Callable[..., Bringup]) -> None:
    """The simulated SGLang imitating its oldest release (not the default, the newest): the release `status`
    shows is the one the server says, read from its `/server_info` after its ready line."""
    from tui.sim.releases import RELEASES

    oldest = next(iter(RELEASES))
    bu = make_bringup(sim_args=("--release", oldest))
    bu.bring_up()
    code, body = bu.http_get("/server_info", timeout=5.0)
    assert code == 200
    theirs = json.loads(body)["version"]
    assert theirs == oldest
    d = bu.status()
    assert d["phase"] == "ready"
    m = resolve("sglang", theirs)
    assert d["release"] == {"version": theirs, "source": "http", "facts": m.facts.version if m.facts else None,
                            "exact": m.exact, "note": m.note}, d["release"]
    plain = bu.ok("status", bu.name).out
    assert f"release: {theirs} (said by its HTTP answer" in plain, plain


@pytest.mark.slow
async def test_the_console_engine_asks_once_per_run(make_bringup: Callable[..., Bringup]) -> None:
    """The live engine learns the release from the probe loop, with one request for its run: later probes do not
    ask again."""
    bu = make_bringup()
    bu.bring_up()
    settings = load(str(bu.config))
    # a generation every 0.5 s once ready: the probe loop goes round many times after the release is known
    probe = settings.probe.model_copy(update={"interval_s": 0.2, "ready_interval_s": 0.5})
    settings = settings.model_copy(update={"probe": probe})
    w = Engine(settings, bu.name, settings.deployments[bu.name])
    probes: list[str] = []
    w.subscribe(lambda u: probes.append(u.result.kind) if isinstance(u, ProbeAnswered) else None)

    t0 = time.time()
    await w.start()
    try:
        await until_async(lambda: ("the release", w.state.phase, probes), lambda: w.snapshot().release_seen is not None)
        n = len(probes)
        await until_async(lambda: ("more generations", w.state.phase, probes),
                          lambda: probes[n:].count("generate") >= 4)
        snap = w.snapshot()
    finally:
        await w.close()
    assert snap.release_seen is not None and snap.release_seen.source == ReleaseSource.HTTP
    assert snap.release is not None and snap.release.version == snap.release_seen.version
    inv = bu.invocation()
    assert inv is not None
    asked = [text for t, text in bu.log_lines(inv) if t >= t0 and "GET /server_info" in text]
    assert len(asked) == 1, asked
