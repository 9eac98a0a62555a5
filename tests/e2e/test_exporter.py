"""`bringup exporter`: its exposition parsed back with prometheus_client's parser, a real simulated deployment
started with the CLI while the exporter's series follow it (stopped -> ready; a crash counted once), a real
Prometheus scraping it through a bring-up, a crash while serving and a `bringup restart` (queried through its HTTP
API), and the shipped alerting rules checked with `promtool test rules`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import wait
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import write_config
from tui.config import load
from tui.engine.fleet import Fleet
from tui.exporter import FLAGS_MAX, FleetCollector, ListenError, flags_label, parse_listen, registry_for
from tui.model import FailureKind, LockInfo, Phase, UnitObserved, UnitState

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "bringup-dashboard.json"

#: every bringup series, its type and its labels
SERIES = {
    "bringup_phase": ("gauge", {"deployment", "host", "phase"}),
    "bringup_phase_seconds": ("gauge", {"deployment"}),
    "bringup_ready": ("gauge", {"deployment"}),
    "bringup_stalled": ("gauge", {"deployment"}),
    "bringup_failures": ("counter", {"deployment", "kind"}),
    "bringup_gpu_memory_bytes": ("gauge", {"deployment", "gpu", "owner"}),
    "bringup_probe_latency_seconds": ("gauge", {"deployment"}),
    "bringup_data_age_seconds": ("gauge", {"deployment", "source"}),
    "bringup_source_up": ("gauge", {"deployment", "source"}),
    "bringup_info": ("gauge", {"deployment", "host", "preset", "invocation", "manager", "flags", "release"}),
    "bringup_up": ("gauge", {"deployment"}),
    "bringup_restarts": ("counter", {"deployment", "outcome"}),
    "bringup_restart_duration_seconds": ("histogram", {"deployment"}),
    "bringup_generation_tokens_per_second": ("gauge", {"deployment"}),
    "bringup_phase_eta_seconds": ("gauge", {"deployment", "until", "match"}),
}
#: the values each label may take beyond the configured names (deployment, host) and the run's own ids: no free text
LABEL_VALUES = {
    "phase": {p.value for p in Phase},
    "kind": {k.value for k in FailureKind},
    "owner": {"this_run", "previous_run", "other"},
    "source": {"unit", "gpus", "metrics"},
    "outcome": {"ready", "failed", "other"},
    "manager": {"systemd", "process", "none", "docker", "compose"},
    "until": {"phase", "ready"},
    "match": {"same-flags", "one-flag-apart"},
}
#: the labels not from a fixed set: the config's names (deployment, host, preset), a GPU, the run's id and its flags
#: (both change only with the run), its release (once a run, a plain release string), the histogram's buckets
FREE_LABELS = {"deployment", "host", "preset", "gpu", "invocation", "flags", "release", "le"}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> tuple[dict[str, Any], Samples]:
    """The exposition parsed back: families by name, and every sample by (name, labels)."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in families.values() for s in f.samples}
    return families, samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def current_phase(samples: Samples, deployment: str) -> str:
    on = [dict(k[1])["phase"] for k, v in samples.items()
          if k[0] == "bringup_phase" and dict(k[1])["deployment"] == deployment and v == 1]
    assert len(on) == 1, on
    return on[0]


# ------------------------------------------------------------------ without processes


def test_listen_is_loopback_unless_allowed() -> None:
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    assert parse_listen("localhost:9000") == ("localhost", 9000)
    for bad in ("0.0.0.0:9464", "10.1.2.3:9464", "example.org:9464"):
        with pytest.raises(ListenError, match="non-loopback"):
            parse_listen(bad)
    assert parse_listen("0.0.0.0:9464", allow_remote=True) == ("0.0.0.0", 9464)
    for bad in ("9464", "127.0.0.1:x", "127.0.0.1:70000"):
        with pytest.raises(ListenError):
            parse_listen(bad)


def test_cli_refuses_a_remote_address_in_one_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    r = bringup(cfg, "exporter", "--listen", "0.0.0.0:9464", timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "non-loopback" in lines[0] and "--allow-remote" in lines[0], r.stderr


def check_labels(families: dict[str, Any]) -> None:
    """Every bringup series with its documented labels, and no label value beyond the documented ones."""
    for name, family in families.items():
        if not name.startswith("bringup_"):
            continue
        assert name in SERIES, f"{name} is exposed but not in SERIES (nor documented)"
        labels = SERIES[name][1]
        for s in family.samples:
            assert set(s.labels) - {"le"} == labels, (name, s.labels)
            for label, v in s.labels.items():
                assert label in FREE_LABELS or v in LABEL_VALUES[label], (name, label, v)


async def test_exposition_names_labels_and_types(tmp_path: Path) -> None:
    """A fleet not yet started (no unit read): every series present with its labels, one phase at 1, the failure
    counter a `_total` counter for every kind, no free text anywhere in the labels. Then a unit reading with a
    command line: the info series carries its flags, shell-quoted, from the first option."""
    settings = load(str(write_config(tmp_path)))
    fleet = Fleet(settings, ["sim"])
    try:
        registry = registry_for(fleet)
        families, samples = parse(generate_latest(registry).decode())
        argv = ("/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/Kimi K2", "--tp", "8",
                "--enable-metrics")
        fleet.engines["sim"].feed(UnitObserved(time.time(), UnitState("active", "running", 4242, "abcdef0123456789",
                                                                       argv=argv)))
        families2, samples2 = parse(generate_latest(registry).decode())
    finally:
        await fleet.close()
    for name, (kind, labels) in SERIES.items():
        if name in ("bringup_gpu_memory_bytes", "bringup_probe_latency_seconds",
                    "bringup_generation_tokens_per_second", "bringup_phase_eta_seconds"):
            continue  # nothing sampled yet: no series rather than a made-up zero
        assert name in families, name
        assert families[name].type == kind, name
        for s in families[name].samples:
            assert set(s.labels) - {"le"} == labels, (name, s.labels)
    check_labels(families)
    check_labels(families2)
    restarts = {dict(k[1])["outcome"]: v for k, v in samples.items() if k[0] == "bringup_restarts_total"}
    assert restarts == {"ready": 0, "failed": 0, "other": 0}
    assert value(samples, "bringup_restart_duration_seconds_count", deployment="sim") == 0
    # no source has answered yet: no age (no made-up one), and bringup_source_up says so
    assert not [k for k in samples if k[0] == "bringup_data_age_seconds"]
    assert {dict(k[1])["source"]: v for k, v in samples.items() if k[0] == "bringup_source_up"} == {
        "unit": 0, "gpus": 0, "metrics": 0}
    info2 = [dict(k[1]) for k in samples2 if k[0] == "bringup_info"]
    assert len(info2) == 1 and info2[0]["invocation"] == "abcdef0123456789", info2
    assert info2[0]["flags"] == "--model-path '/models/Kimi K2' --tp 8 --enable-metrics", info2
    assert {dict(k[1])["phase"] for k in samples if k[0] == "bringup_phase"} == {p.value for p in Phase}
    assert current_phase(samples, "sim") == "unknown"  # not read yet: no claim
    kinds = {dict(k[1])["kind"] for k in samples if k[0] == "bringup_failures_total"}
    assert kinds == {k.value for k in FailureKind}
    assert all(v == 0 for k, v in samples.items() if k[0] == "bringup_failures_total")
    info = [dict(k[1]) for k in samples if k[0] == "bringup_info"]
    assert info == [{"deployment": "sim", "host": "simhost", "preset": "sglang", "invocation": "",
                     "manager": "process", "flags": "", "release": ""}]
    assert value(samples, "bringup_ready", deployment="sim") == 0


def test_rules_pass_promtool() -> None:
    promtool = _binary("promtool")
    for args in (["check", "rules", "bringup-rules.yml"], ["test", "rules", "bringup-rules.test.yml"]):
        r = subprocess.run([promtool, *args], cwd=RULES, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "SUCCESS" in r.stdout


def test_flags_label_is_quoted_and_bounded() -> None:
    long = ("python3", "-m", "sglang.launch_server", "--json-model-override-args", "x" * 5000, "--tp", "8")
    text = flags_label(UnitState("active", argv=long))
    assert len(text) == FLAGS_MAX and text.startswith("--json-model-override-args xxx") and text.endswith("...")
    assert flags_label(None) == flags_label(UnitState("inactive")) == ""
    assert flags_label(UnitState("active", argv=("vllm", "serve", "m", "--x", "a b"))) == "--x 'a b'"


#: PromQL words that are not series names
PROMQL_WORDS = {"sum", "max", "min", "avg", "count", "by", "without", "on", "ignoring", "group_left", "group_right",
                "and", "or", "unless", "rate", "increase", "irate", "max_over_time", "min_over_time",
                "count_over_time", "avg_over_time", "histogram_quantile", "label_values", "bool", "offset"}


def expr_series(expr: str) -> set[str]:
    """The series an expression names: its identifiers less label matchers, grouping labels, functions, words."""
    expr = re.sub(r"label_values\(([^,]+),[^)]*\)", r"\1", expr)  # a variable's query: the label is no series
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {n for n in names if n not in PROMQL_WORDS}


async def test_dashboard_queries_only_exported_series(tmp_path: Path) -> None:
    """The dashboard: valid JSON, the phases as a state timeline beside the deployments' own throughput (filtered by
    $deployment), and every query naming only series the exporter exposes."""
    d = json.loads(DASHBOARD.read_text())
    types = {p["type"]: p for p in d["panels"]}
    assert "state-timeline" in types and "timeseries" in types
    assert "bringup_phase" in types["state-timeline"]["targets"][0]["expr"]
    assert len({p["id"] for p in d["panels"]}) == len(d["panels"])
    timeline = types["state-timeline"]
    tput = [p for p in d["panels"] if "throughput" in p["title"].lower()]
    assert len(tput) == 1 and tput[0]["gridPos"]["y"] == timeline["gridPos"]["y"], tput  # side by side
    assert [t["expr"] for t in tput[0]["targets"]] == [
        'bringup_generation_tokens_per_second{deployment=~"$deployment"}']
    exposed = {name + suffix for name, (kind, _) in SERIES.items()
               for suffix in {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(kind, ("",))}
    exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in d["templating"]["list"] if v.get("type") == "query"]
    assert exprs
    for expr in exprs:
        named = expr_series(expr)
        assert named and named <= exposed, (expr, named - exposed)


# ------------------------------------------------------------------ restarts, from lock records


class _Engine:
    """What the restart counting reads of an engine: its phase (the exporter's own view of the run)."""

    def __init__(self, phase: Phase) -> None:
        self.state = type("State", (), {"phase": phase})()


def restart_counts(collector: FleetCollector) -> tuple[dict[str, float], float, float]:
    """(restarts by outcome, histogram count, histogram sum) of deployment `sim`, through the exposition."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    samples = parse(generate_latest(registry).decode())[1]
    outcomes = {dict(k[1])["outcome"]: v for k, v in samples.items() if k[0] == "bringup_restarts_total"}
    return (outcomes, value(samples, "bringup_restart_duration_seconds_count", deployment="sim") or 0.0,
            value(samples, "bringup_restart_duration_seconds_sum", deployment="sim") or 0.0)


async def test_restarts_counted_by_outcome_from_lock_records(tmp_path: Path) -> None:
    """Lock records as another bringup writes them (tui/ops/guard.py: `{note_prefix}{step}: {detail}`, the sweep's
    prefix `sweep K/N NAME: `, tui/sweep/runner.py): a `bringup restart` whose run fails is counted `failed` with
    the time it held the lock; one let go while the run still starts waits for the outcome, then says `other`;
    every configuration a sweep restarts under its one lock is counted, from its own steps to its `follow` outcome
    (a retry is a restart of its own; one whose outcome the record never showed takes the engine's phase)."""
    fleet = Fleet(load(str(write_config(tmp_path))), ["sim"])
    T = time.time() - 1000  # the records' times; a scrape reads the clock, by which no outcome has had its 30 s
    try:
        c = FleetCollector(fleet)
        failed, starting, ready = _Engine(Phase.FAILED), _Engine(Phase.LOADING), _Engine(Phase.READY)
        # a restart by `bringup restart`: its run fails
        r1 = LockInfo("ops@h1", 4100, T + 1000, "restart sim", "--cuda-graph-max-bs=64", token="r1")
        c.note_holder("sim", failed, r1, T + 1001)
        c.note_holder("sim", failed, replace(r1, **{"step": "start: starting python3 -m ..."}), T + 1010)
        c.note_holder("sim", failed, None, T + 1040)
        c.note_outcome("sim", failed, T + 1041)
        assert restart_counts(c) == ({"ready": 0, "failed": 1, "other": 0}, 1, 40.0)
        # another, let go while its run is still loading: awaited, then `other` after OUTCOME_WAIT_S
        r2 = LockInfo("ops@h1", 4200, T + 2000, "restart sim", token="r2")
        c.note_holder("sim", starting, r2, T + 2001)
        c.note_holder("sim", starting, None, T + 2010)
        c.note_outcome("sim", starting, T + 2011)
        assert restart_counts(c)[0]["other"] == 0
        c.note_outcome("sim", starting, T + 2045)
        assert restart_counts(c) == ({"ready": 0, "failed": 1, "other": 1}, 2, 50.0)

        # a sweep of three configurations, then the restore of the flags it started from, under one lock
        sw = LockInfo("ops@h1", 4300, T + 3000, "sweep sim", "sweep kimi: 3 configurations", token="s1")

        def note(step: str, engine: _Engine, at: float) -> None:
            c.note_holder("sim", engine, replace(sw, **{"step": step}), at)
        note("", ready, T + 3000)
        note("sweep 1/3 graphs-on: flags: flags written: --cuda-graph-max-bs=64", ready, T + 3002)
        note("sweep 1/3 graphs-on: release: waiting for GPU memory: 8 GPUs, 548 GiB held", ready, T + 3010)
        note("sweep 1/3 graphs-on: follow: loading", starting, T + 3020)
        note("sweep 1/3 graphs-on: follow: ready: a generation from the new process succeeded", ready, T + 3030)
        assert restart_counts(c)[0] == {"ready": 1, "failed": 1, "other": 1}
        note("sweep 2/3 graphs-off: flags: flags written: --disable-cuda-graph", ready, T + 3100)
        note("sweep 2/3 graphs-off: follow: failed in graph-capture: cuda-graph", failed, T + 3112)
        note("sweep 2/3 graphs-off: flags: flags unchanged", failed, T + 3114)  # its retry: a restart of its own
        note("sweep 2/3 graphs-off: follow: loading", starting, T + 3120)
        # the next configuration's first step before the retry's outcome was read: the engine's phase then
        note("sweep 3/3 bs=128: flags: flags written: --max-running-requests=128", starting, T + 3124)
        note("sweep 3/3 bs=128: follow: ready", ready, T + 3144)
        note("sweep 3/3 bs=128: follow: ready: a generation from the new process succeeded", ready, T + 3145)
        note("sweep: restoring graphs-on: flags: flags written: --cuda-graph-max-bs=64", ready, T + 3200)
        c.note_holder("sim", ready, None, T + 3230)  # let go before its restore's outcome was read: awaited
        c.note_outcome("sim", ready, T + 3231)
        outcomes, count, total = restart_counts(c)
        # sweep: ready (28 s), failed (12 s), other (10 s), ready (20 s), the restore ready (30 s)
        assert outcomes == {"ready": 3, "failed": 2, "other": 2}, outcomes
        assert count == 7 and total == 50.0 + 28 + 12 + 10 + 20 + 30, (count, total)

        # an exporter started during a sweep: a restart already over when first seen is not counted
        c2 = FleetCollector(fleet)
        note2 = replace(sw, **{"token": "s2", "step": "sweep 2/3 graphs-off: follow: ready: done"})
        c2.note_holder("sim", ready, note2, T + 4000)
        c2.note_holder("sim", ready, None, T + 4100)
        c2.note_outcome("sim", ready, T + 4100)
        assert restart_counts(c2)[1] == 0
    finally:
        await fleet.close()


# ------------------------------------------------------------------ a source that stops answering


async def test_a_failing_gpu_source_shows_a_growing_age(tmp_path: Path) -> None:
    """The host's nvidia-smi works, then fails (the driver gone, as after an Xid): the GPU age keeps growing from
    the last good sample, the last memory figures stay with it, and bringup_source_up says the source fails."""

    from tests.helpers.config_toml import ConfigFile
    from tests.helpers.simdeploy import process_deployment, sim_command
    from tui.config import HostConfig, ProbeConfig

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
                          timeout=timeout, env=_env(), cwd=cfg.parent, stdin=subprocess.DEVNULL)


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
            rc = p.wait(timeout=20)
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
                    prom.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    prom.kill()
                    prom.wait()
                prom_log.close()
    finally:
        bringup(cfg, "stop", "sim")
