"""The Prometheus exporter's series as functions of the engines' snapshots and the lock records (tui/exporter): names,
labels and types, the flags label quoted and bounded, restarts counted by outcome, the dashboard asking only for
series that are exported, a listen address on loopback unless allowed. The exporter as a process, scraped by a real
Prometheus: tests/e2e/test_exporter.py."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.helpers.exposition import current_phase, parse, value
from tests.helpers.simdeploy import write_config
from tui.cli.listen import ListenError, parse_listen
from tui.config.settings import load
from tui.engine.fleet import Fleet
from tui.exporter.collector import FLAGS_MAX, FleetCollector, flags_label, registry_for
from tui.model import FailureKind, LockInfo, Phase, UnitObserved, UnitState

ROOT = Path(__file__).resolve().parents[2]


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


def test_flags_label_is_quoted_and_bounded() -> None:
    long = ("python3", "-m", "sglang.launch_server", "--json-model-override-args", "x" * 5000, "--tp", "8")
    text = flags_label(UnitState("active", argv=long))
    assert len(text) == FLAGS_MAX and text.startswith("--json-model-override-args xxx") and text.endswith("...")
    assert flags_label(None) == flags_label(UnitState("inactive")) == ""
    assert flags_label(UnitState("active", argv=("vllm", "serve", "m", "--x", "a b"))) == "--x 'a b'"


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
