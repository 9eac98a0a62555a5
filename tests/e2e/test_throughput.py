"""Throughput end to end on the simulated SGLang server: the console's numbers against the server's own,
accept length with speculative decoding, the no-metrics case, and `bringup bench`."""

from __future__ import annotations

import asyncio
import http.server
import itertools
import json
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait
from tests.helpers.e2e import Bringup, free_port, kill_processes, wait_no_sim_processes
from tests.helpers.wait import slack, until_async
from tui.config.settings import load
from tui.engine import Engine

pytestmark = pytest.mark.slow


@pytest.fixture
def bu(tmp_path: Path) -> Iterator[Bringup]:
    b = Bringup(tmp_path, sim_args=("--sim-load", "4"))
    yield b
    b.run("stop", b.name, timeout=60)
    left = wait_no_sim_processes(str(tmp_path), timeout=5.0)
    if left:
        kill_processes(left)
        pytest.fail(f"processes left behind: {left}")


def sim_gauge(b: Bringup) -> float:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{b.endpoint}/metrics", timeout=2) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("sglang:gen_throughput"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError("the sim has no gen_throughput gauge")


async def test_console_tokens_per_second_agree_with_the_server(bu: Bringup) -> None:
    bu.bring_up()
    settings = load(str(bu.config))
    w = Engine(settings, bu.name, settings.deployments[bu.name])
    await w.start()
    ours: list[float] = []
    theirs: list[float] = []
    try:
        deadline = time.monotonic() + slack(60)
        while len(ours) < 8:  # counted in samples, not in a window of wall-clock time
            assert time.monotonic() < deadline, ("too few metrics samples", ours)
            await asyncio.sleep(1.0)  # one side-by-side reading a second
            if w.throughput is not None and w.throughput.source == "metrics" and w.throughput.tokens_per_s:
                ours.append(w.throughput.tokens_per_s)
                theirs.append(await asyncio.to_thread(sim_gauge, bu))
    finally:
        await w.close()
    assert len(ours) >= 6, "too few metrics samples"
    mine, server = statistics.fmean(ours[2:]), statistics.fmean(theirs[2:])
    assert abs(mine - server) / server < 0.05, (ours, theirs)


def test_status_json_has_tokens_per_second_and_accept_length_with_speculation(bu: Bringup) -> None:
    bu.bring_up("--set", "speculative-algorithm=DFLASH", "--set", "speculative-dflash-block-size=8",
                "--set", "disable-cuda-graph")
    tp = wait.until("tokens/s and an acceptance length in the status", lambda: (t := bu.status()["throughput"])
                    and t["tokens_per_s"] and t["accept_len"] is not None and t)
    assert tp["tokens_per_s"] and tp["tokens_per_s"] > 0
    assert tp["accept_len"] is not None and tp["accept_len"] > 1.0


def test_without_metrics_the_log_lines_are_used_and_the_hint_is_given(bu: Bringup) -> None:
    bu.bring_up("--unset", "enable-metrics")
    # the first decode line comes about a second after ready (longer when busy)
    st = wait.until("tokens/s from the log",
                    lambda: x if ((x := bu.status())["throughput"] or {}).get("tokens_per_s") else None, 20)
    assert st["throughput"]["source"] == "log" and st["throughput"]["tokens_per_s"] > 0
    assert any("--enable-metrics" in n for n in st["notes"])


def bench(b: Bringup, *args: str) -> tuple[int, Any, str]:
    r = b.run("bench", b.name, "--json", *args, timeout=120)
    return r.rc, (json.loads(r.out) if r.rc == 0 else None), r.err


def test_bench_is_sensible(bu: Bringup) -> None:
    """Whether two runs agree within 30 % is a timing, measured by benchmarks/bench_reproducibility.py."""
    bu.bring_up("--set", "disable-cuda-graph")
    rc, out, err = bench(bu, "--concurrency", "1,4", "--max-tokens", "64", "--requests", "8")
    assert rc == 0, err
    levels = {lv["concurrency"]: lv for lv in out["levels"]}
    one, four = levels[1], levels[4]
    assert one["ok"] == one["requests"] and four["ok"] == four["requests"]
    assert four["aggregate_tps"] > 2 * one["aggregate_tps"]  # concurrency pays off
    assert 5 < one["stream_tps_mean"] < 1000 and 0 < one["ttft_p50_s"] < 5


def test_bench_endpoint_down_is_a_clear_error(bu: Bringup) -> None:
    rc, _, err = bench(bu)
    assert rc == 1 and "cannot connect" in err and "Traceback" not in err


@pytest.fixture
def not_openai(tmp_path: Path) -> Iterator[Callable[[], str]]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>not here</html>")

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield lambda: f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_bench_on_a_server_that_is_not_openai_compatible(tmp_path: Path, not_openai: Callable[[], str]) -> None:
    b = Bringup(tmp_path)
    b.config.write_text(f'[deployments.web]\nmanager = "none"\nendpoint = "{not_openai()}"\n')
    r = b.run("bench", "web", timeout=60)
    assert r.rc == 1 and "not an OpenAI-compatible" in r.err and "Traceback" not in r.err


def test_status_attributes_gpu_memory_to_the_run(bu: Bringup) -> None:
    bu.bring_up()
    a = bu.status()["attribution"]
    # the simulated server holds its memory from its own process: the process group of this run
    assert a["current_mib"] > 8 * 100_000 and a["previous_mib"] == 0 and a["other_mib"] == 0 and a["note"] is None


async def test_once_ready_and_serving_the_probe_slows_down_and_the_operator_can_ask(bu: Bringup) -> None:
    """The counters (/metrics under the simulated load) prove the run alive: no /health in the server's log, a
    generation every `ready_interval_s`; a probe asked for is sent at once."""
    from tui.engine import LogsRead, ProbeAnswered
    from tui.engine.cadence import Pace
    from tui.model import Phase

    bu.bring_up()
    settings = load(str(bu.config))
    settings = settings.model_copy(update={"probe": settings.probe.model_copy(update={"ready_interval_s": 3.0})})
    w = Engine(settings, bu.name, settings.deployments[bu.name])
    # the first sight of the unit wakes the probe for `wake_s` (30 s): shorter here, so the wait below is about
    # the counters' evidence, not a race against that window
    w.cadence.wake_s = 5.0
    probes: list[tuple[float, str]] = []
    access: list[str] = []
    w.subscribe(lambda u: probes.append((time.monotonic(), u.result.kind)) if isinstance(u, ProbeAnswered) else None)
    w.subscribe(lambda u: access.extend(ln.text for ln in u.lines if '"GET /health' in ln.text
                                        or "POST /v1/completions" in ln.text) if isinstance(u, LogsRead) else None)

    await w.start()
    try:
        await until_async(lambda: ("ready, probed slowly", probes), lambda: w.state.phase == Phase.READY
                          and w.cadence.pace(time.time(), w.state.phase) is Pace.SLOW, 30)
        slow_since, seen, n = time.monotonic(), len(access), len(probes)
        # the pace counted on the probes themselves, not in a wall-clock window: the next three generations
        await until_async(lambda: ("three generations at the slow pace", probes[n:]),
                          lambda: [k for _, k in probes[n:]].count("generate") >= 3, 30)
        gens = [t for t, k in probes[n:] if k == "generate"][:3]
        gaps = [b - a for a, b in itertools.pairwise(gens)]
        assert all(2.7 <= g < 6.0 for g in gaps), gaps  # one every 3 s
        window = [k for t, k in probes[n:] if slow_since + 0.5 <= t <= gens[-1]]  # one under way may still answer
        assert "health" not in window, window
        assert not any('"GET /health' in ln for ln in access[seen:]), access[seen:]
        asked_at = time.monotonic()
        w.probe_now()
        await until_async(lambda: ("the asked-for generation", probes),
                          lambda: any(t >= asked_at and k == "generate" for t, k in probes), 2.0)
        # one generation, and only that: the counters still prove it alive, no /health every 2 s after it
        assert w.cadence.pace(time.time(), w.state.phase) is Pace.SLOW
    finally:
        await w.close()
