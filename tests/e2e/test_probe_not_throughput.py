"""bringup's own readiness probes are never the server's throughput (issue 28, item 6).

The probe is a real generation of `probe.generation_tokens` tokens, and the server counts it like any other: an idle
server that bringup probes showed `4.0 tok/s` in `status` and in the exporter. The prober keeps a ledger of its
generations (tui/collectors/probes.py `ProbeTokens`); the throughput reader takes their tokens out of the counter's
gain, and reads an interval of the server's own figure (the gauge, the decode log line) whose only work was the
probe as idle. Pure tests of the reader first, then the simulated server with the CLI and the exporter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.ports import free_port
from tests.helpers.reducer_events import DECODE_LINE_OF, SGLANG
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host
from tests.helpers.wait import slack, until, until_async
from tui.collectors.metrics import from_log_line
from tui.collectors.probes import Prober, ProbeTokens
from tui.config.settings import ProbeConfig

# ------------------------------------------------------------------------------------- another bringup's generations


def test_a_generation_left_when_its_command_exits_is_still_bringups_own_in_the_server(tmp_path: Path) -> None:
    # `bringup status` exits while its probe's generation is under way: the server goes on with it, and the next
    # process that reads its log or counters must know it is bringup's own
    async def scenario() -> tuple[float, float]:
        received = asyncio.Event()

        async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(65536)
            received.set()
            await asyncio.Event().wait()  # no answer, ever

        server = await asyncio.start_server(never_answers, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        p = Prober(f"http://127.0.0.1:{port}", timeout=2.0, generations_file=tmp_path / "generations")
        p.model_id = "m"
        task = asyncio.create_task(p.generate())
        await until_async("the generation counted in flight", lambda: p.generated.in_flight(0, time.time()) > 0,
                          every=0.01)
        await asyncio.wait_for(received.wait(), slack(10))  # sent, and no answer
        left = time.time()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await p.close()
        server.close()
        return left, time.time()

    left, after = asyncio.run(scenario())
    other = ProbeTokens(tmp_path / "generations")
    assert other.in_flight(left, after) == 1
    assert other.in_flight(after + 5.0, after + 5.0) == 1  # the server may still be at it: as long again as given
    s = from_log_line(SGLANG, DECODE_LINE_OF.format(n=1, q=0), after + 1.0, other)
    assert s is not None and s.tokens_per_s == 0.0


# ------------------------------------------------------------------------------------------------ real processes


def _config(tmp: Path, *, load: int) -> Bringup:
    """A simulated server with metrics, `load` background streams, probed once a second once ready (16 tokens)."""
    bu = Bringup(tmp)
    cmd = sim_command(bu.port, bu.sim_state, time_scale=0.1, sim_load=load)
    ConfigFile(state_dir=bu.state_dir, hosts={"simhost": sim_host(bu.sim_state)},
               deployments={bu.name: process_deployment(cmd, bu.port, stop_timeout_s=20)},
               probe=ProbeConfig(interval_s=0.3, ready_interval_s=1.0, generation_tokens=16)).write(bu.config)
    return bu


def _server_requests(bu: Bringup) -> float:
    """The requests the simulated server has answered (its own counter)."""
    _, body = bu.http_get("/metrics", timeout=5.0)
    return sum(s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples
               if s.name == "sglang:num_requests_total")


@contextlib.contextmanager
def _exporter(bu: Bringup) -> Iterator[str]:
    port = free_port()
    p = subprocess.Popen(bu.cmd("exporter", "--listen", f"127.0.0.1:{port}"), cwd=bu.tmp, env=bu.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().startswith("serving "), p.stderr.read() if p.stderr else ""
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        p.terminate()
        try:
            p.wait(slack(20))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _exported_tps(url: str) -> tuple[bool, float | None]:
    """(ready, tokens/s) as the exporter serves them for the deployment `sim`."""
    text = httpx.get(url, timeout=5).text
    ready, tps = False, None
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            if s.name == "bringup_ready" and s.labels.get("deployment") == "sim":
                ready = s.value == 1
            if s.name == "bringup_generation_tokens_per_second" and s.labels.get("deployment") == "sim":
                tps = s.value
    return ready, tps


@pytest.mark.slow
def test_an_idle_server_probed_by_bringup_shows_no_throughput(tmp_path: Path) -> None:
    bu = _config(tmp_path, load=0)
    try:
        bu.bring_up()
        for _ in range(2):
            r = bu.run("status", bu.name, "--json")
            assert r.rc == 0, r.describe()
            tp = json.loads(r.out)["throughput"]
            assert tp is not None and tp["tokens_per_s"] in (0, 0.0, None), tp  # its own probe is no throughput
        text = bu.run("status", bu.name)
        assert "throughput: 0.0 tok/s (metrics, idle)" in text.out, text.describe()

        with _exporter(bu) as url:
            until("the exporter to say ready", lambda: _exported_tps(url)[0], 60, every=0.1)
            # the exporter's engine probes once a second: read its figure until the server has answered five more
            # probes (every one of them in some interval between two of the exporter's scrapes of /metrics)
            start = _server_requests(bu)
            seen: list[float | None] = []

            def five_more_probes_seen() -> bool:
                seen.append(_exported_tps(url)[1])
                return _server_requests(bu) >= start + 5 and len([x for x in seen if x is not None]) >= 3

            until(lambda: f"the probes to run: {seen}", five_more_probes_seen, 60, every=0.25)
            figures = [x for x in seen if x is not None]
            assert figures and all(x == 0 for x in figures), seen
    finally:
        bu.run("stop", bu.name)


@pytest.mark.slow
def test_real_load_still_shows_its_throughput(tmp_path: Path) -> None:
    bu = _config(tmp_path, load=2)
    try:
        bu.bring_up()
        r = bu.run("status", bu.name, "--json")
        assert r.rc == 0, r.describe()
        tp = json.loads(r.out)["throughput"]
        # two streams of the simulated model: tens of tokens a second each (the probe's 16 a second is not it)
        assert tp is not None and tp["tokens_per_s"] is not None and tp["tokens_per_s"] > 40, tp
    finally:
        bu.run("stop", bu.name)
