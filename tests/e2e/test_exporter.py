"""`bringup exporter`: its exposition parsed back with prometheus_client's parser, a real simulated deployment
started with the CLI while the exporter's series follow it (stopped -> ready; a crash counted once), a real
Prometheus scraping it through a bring-up, a crash while serving and a `bringup restart` (queried through its HTTP
API), and the shipped alerting rules checked with `promtool test rules`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest

from tests.helpers import wait
from tests.helpers.exposition import Samples, current_phase, parse, value
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import write_config
from tests.helpers.wait import slack
from tui.config.settings import load
from tui.engine.fleet import Fleet
from tui.exporter.collector import registry_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus"


# ------------------------------------------------------------------ without processes


def test_cli_refuses_a_remote_address_in_one_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    r = bringup(cfg, "exporter", "--listen", "0.0.0.0:9464", timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "non-loopback" in lines[0] and "--allow-remote" in lines[0], r.stderr


def test_rules_pass_promtool() -> None:
    promtool = _binary("promtool")
    for args in (["check", "rules", "bringup-rules.yml"], ["test", "rules", "bringup-rules.test.yml"]):
        r = subprocess.run([promtool, *args], cwd=RULES, capture_output=True, text=True, timeout=slack(60))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "SUCCESS" in r.stdout


# ------------------------------------------------------------------ a source that stops answering


async def test_a_failing_gpu_source_shows_a_growing_age(tmp_path: Path) -> None:
    """The host's nvidia-smi works, then fails (the driver gone, as after an Xid): the GPU age keeps growing from
    the last good sample, the last memory figures stay with it, and bringup_source_up says the source fails."""

    from tests.helpers.config_toml import ConfigFile
    from tests.helpers.simdeploy import process_deployment, sim_command
    from tui.config.parts import HostConfig
    from tui.config.settings import ProbeConfig

    broken = tmp_path / "driver-gone"
    # the simulated nvidia-smi until `broken` exists; then it stops, and every new one fails as a real one does
    script = (f'if [ -e "{broken}" ]; then echo "Failed to initialize NVML: Driver/library version mismatch"; '
              'exit 9; fi; "$0" -m tui.sim.nvidia_smi --sim-state-dir "$SIMGPU" "$@" & p=$!; '
              f'while [ ! -e "{broken}" ] && kill -0 $p 2>/dev/null; do sleep 0.1; done; kill $p 2>/dev/null; exit 9')
    host = HostConfig(gpu_source="nvidia-smi", nvidia_smi=["env", f"SIMGPU={tmp_path / 'simgpu'}", "sh", "-c", script,
                                                           sys.executable])
    port = free_port()
    dep = process_deployment(sim_command(port, tmp_path / "simgpu"), port)
    cfg = ConfigFile(state_dir=tmp_path / "state", probe=ProbeConfig(interval_s=0.3), hosts={"simhost": host},
                     deployments={"sim": dep}).write(tmp_path / "config.toml")
    fleet = Fleet(load(str(cfg)), ["sim"])
    registry = registry_for(fleet)

    def read() -> Samples:
        return parse(generate_latest(registry).decode())[1]

    def gpu_age(x: Samples) -> float | None:
        return value(x, "bringup_data_age_seconds", deployment="sim", source="gpus")

    def memory(x: Samples) -> int:
        return len([k for k in x if k[0] == "bringup_gpu_memory_bytes"])

    async def until_async(what: str, pred: Callable[[Samples], bool], timeout: float = 30.0) -> Samples:
        return await wait.until_async(what, lambda: x if pred(x := read()) else None, timeout)
    try:
        fleet.start()
        s = await until_async("a GPU sample", lambda x: gpu_age(x) is not None and memory(x) == 24)
        assert value(s, "bringup_source_up", deployment="sim", source="gpus") == 1
        assert (gpu_age(s) or 0) < 5
        broken.touch()
        s = await until_async("the GPU source failing", lambda x: value(
            x, "bringup_source_up", deployment="sim", source="gpus") == 0, timeout=30)
        first = gpu_age(s)
        assert first is not None and memory(s) == 24, (first, memory(s))  # still there, with its age
        s = await until_async("the age growing", lambda x: (gpu_age(x) or 0) >= (first or 0) + 2)
        assert memory(s) == 24 and value(s, "bringup_source_up", deployment="sim", source="gpus") == 0
        assert value(s, "bringup_source_up", deployment="sim", source="unit") == 1
    finally:
        await fleet.close()


# ------------------------------------------------------------------ a real deployment, a real Prometheus


def bringup(cfg: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True, text=True,
                          timeout=slack(timeout), env=_env(), cwd=cfg.parent, stdin=subprocess.DEVNULL)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("BRINGUP_PROMETHEUS") == "required":
            pytest.fail(f"`{name}` is not installed but BRINGUP_PROMETHEUS=required (.ci/run installs it)")
        pytest.skip(f"`{name}` is not installed (apt-get install prometheus); BRINGUP_PROMETHEUS=required makes "
                    "this a failure")
    return path


def until(what: str, fn: Callable[[], Any], timeout: float = 60.0) -> Any:
    """The shared wait (tests/helpers/wait.py), a scrape that finds nothing listening yet counting as not yet."""
    return wait.until(what, fn, timeout, retry_on=(httpx.HTTPError, OSError))


@contextmanager
def exporter(cfg: Path, *deployments: str) -> Iterator[str]:
    """`bringup exporter` on a free loopback port; yields the /metrics URL once it answers."""
    port = free_port()
    log = (cfg.parent / "exporter.err").open("w")
    p = subprocess.Popen([sys.executable, "-m", "tui", "--config", str(cfg), "exporter", "--listen",
                          f"127.0.0.1:{port}", *deployments], stdout=subprocess.PIPE, stderr=log, text=True,
                         env=_env(), cwd=cfg.parent, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert p.stdout is not None
        first = p.stdout.readline()
        assert first.startswith(f"serving {url}"), first + (cfg.parent / "exporter.err").read_text()
        until("the exporter to answer", lambda: httpx.get(url, timeout=2).status_code == 200)
        yield url
    finally:
        p.terminate()  # SIGTERM, as systemd stops it: a clean exit 0
        try:
            rc = p.wait(timeout=slack(20))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        log.close()
    assert rc == 0, (cfg.parent / "exporter.err").read_text()


def scrape(url: str) -> Samples:
    return parse(httpx.get(url, timeout=5).text)[1]


@pytest.mark.slow
def test_phase_series_follow_a_start(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    try:
        with exporter(cfg, "sim") as url:
            s = until("stopped", lambda: (x := scrape(url)) and current_phase(x, "sim") == "stopped" and x)
            assert value(s, "bringup_ready", deployment="sim") == 0
            assert value(s, "bringup_up", deployment="sim") == 1
            r = bringup(cfg, "start", "sim", "--no-wait")
            assert r.returncode == 0, r.stderr
            seen = ["stopped"]

            def ready() -> Samples | None:
                x = scrape(url)
                phase = current_phase(x, "sim")
                if phase != seen[-1]:
                    seen.append(phase)
                return x if phase == "ready" else None
            s = until("ready", ready)
            assert seen[0] == "stopped" and seen[-1] == "ready" and len(seen) >= 3, seen  # through start-up phases
            assert value(s, "bringup_ready", deployment="sim") == 1
            assert value(s, "bringup_stalled", deployment="sim") == 0
            info = [dict(k[1]) for k in s if k[0] == "bringup_info"]
            assert len(info) == 1 and len(info[0]["invocation"]) >= 8, info
            assert info[0]["flags"].startswith("--port ") and " --tp-size 8 " in info[0]["flags"], info
            # the release, once the simulated SGLang's /server_info has named it (one request, after its ready line)
            s = until("the release label", lambda: (x := scrape(url)) and [
                dict(k[1]) for k in x if k[0] == "bringup_info" and dict(k[1])["release"]] and x)
            release = next(dict(k[1])["release"] for k in s if k[0] == "bringup_info")
            assert re.fullmatch(r"\d+\.\d+\.\d+[\w.+-]*", release), release

            def this_run(x: Samples) -> list[float]:
                return [v for k, v in x.items() if k[0] == "bringup_gpu_memory_bytes"
                        and dict(k[1])["owner"] == "this_run"]
            # the simulated 8 GPUs' memory is the new run's within seconds, though every deployment of the exporter
            # is in the background (its GPUs' processes read every 10 s, unless their memory moves: it did)
            s = until("this run's GPU memory", lambda: (x := scrape(url)) and len(this_run(x)) == 8
                      and all(v > 0 for v in this_run(x)) and x, timeout=8.0)
            assert (value(s, "bringup_probe_latency_seconds", deployment="sim") or -1) >= 0
            # the server's /metrics is read once a second from ready on: its age shows up
            s = until("a throughput reading", lambda: (x := scrape(url)) and value(
                x, "bringup_data_age_seconds", deployment="sim", source="metrics") is not None and x)
            s = until("the deployment's tokens/s", lambda: (x := scrape(url)) and value(
                x, "bringup_generation_tokens_per_second", deployment="sim") is not None and x)
            tps = value(s, "bringup_generation_tokens_per_second", deployment="sim")
            assert tps is not None and tps >= 0, tps  # 0 while idle: a figure all the same
            ages = {dict(k[1])["source"]: v for k, v in s.items() if k[0] == "bringup_data_age_seconds"}
            assert set(ages) == {"unit", "gpus", "metrics"} and all(0 <= a < 10 for a in ages.values()), ages
            assert 0 <= (value(s, "bringup_phase_seconds", deployment="sim") or -1) < 60
    finally:
        bringup(cfg, "stop", "sim")


@pytest.mark.slow
def test_a_crash_is_counted_once(tmp_path: Path) -> None:
    """Ready, then the scheduler dies while serving: failed, and the failure counted once for that run however
    often it is scraped."""
    cfg = write_config(tmp_path, scenario="crash-while-serving")
    try:
        with exporter(cfg, "sim") as url:
            until("stopped", lambda: current_phase(scrape(url), "sim") == "stopped")
            assert bringup(cfg, "start", "sim", "--no-wait").returncode == 0

            def counted() -> Samples | None:
                x = scrape(url)
                total = sum(v for k, v in x.items() if k[0] == "bringup_failures_total")
                return x if current_phase(x, "sim") == "failed" and total >= 1 else None
            s = until("the crash counted", counted)
            for _ in range(5):
                s = scrape(url)
            kinds = {dict(k[1])["kind"]: v for k, v in s.items() if k[0] == "bringup_failures_total" and v}
            assert sum(kinds.values()) == 1, kinds
            assert current_phase(s, "sim") == "failed"
    finally:
        bringup(cfg, "stop", "sim")


def crash_it(endpoint: str) -> None:
    """One streamed chat request: the simulated server's scheduler dies on it (--sim-crash-after-requests 1),
    as a real one does mid-serving; the stream may be cut, which is the point."""
    body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 64}
    try:
        with httpx.stream("POST", f"{endpoint}/v1/chat/completions", json=body, timeout=30) as r:
            for _ in r.iter_bytes():
                pass
    except httpx.HTTPError:
        pass


def phases_over_time(result: list[dict[str, Any]]) -> list[str]:
    """A range query of `bringup_phase == 1` as the sequence of phases Prometheus recorded (repeats collapsed)."""
    at = sorted((float(t), series["metric"]["phase"]) for series in result for t, _ in series["values"])
    seq: list[str] = []
    for _, phase in at:
        if not seq or seq[-1] != phase:
            seq.append(phase)
    return seq


@pytest.mark.slow
def test_prometheus_scrapes_the_exporter(tmp_path: Path) -> None:
    """A real Prometheus scraping the exporter every 500 ms while the deployment is started, crashes while serving
    and is restarted by `bringup restart`: its HTTP API has the phases in that order, one failure counted, two runs,
    and the shipped BringupDeploymentFailed alert firing while failed and gone once ready again."""
    prometheus = _binary("prometheus")
    cfg = write_config(tmp_path, sim_args=("--sim-crash-after-requests", "1"))
    endpoint = str(load(str(cfg)).deployments["sim"].endpoint)
    prom_port = free_port()
    api = f"http://127.0.0.1:{prom_port}/api/v1/query"
    t0 = time.time()

    def query(expr: str) -> list[dict[str, Any]]:
        r = httpx.get(api, params={"query": expr}, timeout=5).json()
        assert r["status"] == "success", r
        return list(r["data"]["result"])

    def one(expr: str) -> float | None:
        res = query(expr)
        return float(res[0]["value"][1]) if res else None

    try:
        with exporter(cfg, "sim") as url:
            target = url.removeprefix("http://").removesuffix("/metrics")
            conf = tmp_path / "prometheus.yml"
            conf.write_text("global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\n"
                            f"rule_files: ['{RULES / 'bringup-rules.yml'}']\n"
                            "scrape_configs:\n  - job_name: bringup\n    scrape_interval: 500ms\n"
                            f"    static_configs:\n      - targets: ['{target}']\n")
            prom_log = (tmp_path / "prometheus.log").open("w")
            prom = subprocess.Popen([prometheus, f"--config.file={conf}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                     f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=prom_log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path)
            try:
                until("prometheus ready", lambda: httpx.get(f"http://127.0.0.1:{prom_port}/-/ready",
                                                            timeout=2).status_code == 200, timeout=30)
                until("the first scrape: stopped",
                      lambda: one('bringup_phase{deployment="sim",phase="stopped"}') == 1)
                assert one('bringup_ready{deployment="sim"}') == 0
                assert bringup(cfg, "start", "sim", "--no-wait").returncode == 0
                until("bringup_ready 1 in Prometheus", lambda: one('bringup_ready{deployment="sim"}') == 1)
                assert one('bringup_phase{deployment="sim",phase="ready"}') == 1
                # the phase series changed in Prometheus's own record: stopped, then (later) ready
                assert one('max_over_time(bringup_phase{deployment="sim",phase="stopped"}[1m])') == 1
                assert one('bringup_phase{deployment="sim",phase="stopped"}') == 0
                rules = httpx.get(f"http://127.0.0.1:{prom_port}/api/v1/rules", timeout=5).json()
                names = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
                assert "BringupDeploymentFailed" in names, rules
                first_run = query('bringup_info{deployment="sim"}')[0]["metric"]["invocation"]
                assert first_run, first_run

                # the scheduler dies while serving: failed, counted once, and the alert fires
                crash_it(endpoint)
                until("failed in Prometheus", lambda: one('bringup_phase{deployment="sim",phase="failed"}') == 1)
                assert one('bringup_ready{deployment="sim"}') == 0
                until("the failure counted", lambda: one('sum(bringup_failures_total{deployment="sim"})') == 1)
                firing = 'ALERTS{alertname="BringupDeploymentFailed",alertstate="firing",deployment="sim"}'
                until("BringupDeploymentFailed firing", lambda: one(firing) == 1)

                # a restart by the CLI while Prometheus scrapes: a new run, ready, the alert resolved
                r = bringup(cfg, "restart", "sim", "--yes")
                assert r.returncode == 0, r.stdout + r.stderr
                until("ready again in Prometheus", lambda: one('bringup_ready{deployment="sim"}') == 1)
                second_run = query('bringup_info{deployment="sim"}')[0]["metric"]["invocation"]
                assert second_run and second_run != first_run
                until("the alert resolved", lambda: not query(firing))
                assert one('sum(bringup_failures_total{deployment="sim"})') == 1  # a restart is no failure
                # the restart, seen by its lock record: counted once, ready, with how long it held the lock
                until("the restart counted", lambda: one(
                    'bringup_restarts_total{deployment="sim",outcome="ready"}') == 1)
                assert one('sum(bringup_restarts_total{deployment="sim"})') == 1
                assert one('bringup_restart_duration_seconds_count{deployment="sim"}') == 1
                assert 0 < one('bringup_restart_duration_seconds_sum{deployment="sim"}') < 120
                # a run can have more than one series (its release label comes once the server says it): count runs
                runs = query('count(count by (invocation) (count_over_time(bringup_info{deployment="sim",'
                             'invocation!=""}[5m])))')
                assert float(runs[0]["value"][1]) == 2, runs

                # the phases in Prometheus's own record, in order
                rng = httpx.get(f"http://127.0.0.1:{prom_port}/api/v1/query_range", timeout=5, params={
                    "query": 'bringup_phase{deployment="sim"} == 1', "start": f"{t0:.3f}",
                    "end": f"{time.time():.3f}", "step": "0.25"}).json()
                assert rng["status"] == "success", rng
                seq = phases_over_time(rng["data"]["result"])
                starting = {"starting", "loading", "graph-capture", "warmup", "stopping"}
                assert seq[0] == "stopped" and seq[-1] == "ready", seq
                fail = seq.index("failed")
                assert "ready" in seq[:fail] and seq.count("failed") == 1, seq
                assert starting & set(seq[fail + 1:-1]), seq  # the restart's own start-up phases, recorded
            finally:
                prom.terminate()
                try:
                    prom.wait(timeout=slack(20))
                except subprocess.TimeoutExpired:
                    prom.kill()
                    prom.wait()
                prom_log.close()
    finally:
        bringup(cfg, "stop", "sim")
