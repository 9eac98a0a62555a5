"""The simulated server against the releases it claims to imitate (`--release`, tui/sim/releases.py): what it prints,
parses, serves and exports is held to the facts extracted from each release's wheel (tui/lifecycle/presets/facts/,
read through tui/lifecycle/presets/facts.py), so the product's tests, which lean on the sim, lean on a real release.

For each claimed release one sim runs (speculative decoding on, graphs captured, metrics on, no warmup request), a
streamed chat request decodes while /metrics is read, then it and a native /generate request finish:
- every metric family on its page is one the release defines, of the same type, with the same label names;
- the counters that moved only once a request finished are exactly those the release moves in a method run at
  request finish (`updated_in`), and the ones that moved while it decoded are not;
- its arguments line has the release's form (`server_args=ServerArgs(...)` or `server_args={...}`);
- each bring-up line (a phase marker of the SGLang preset, or one of the sim's start-up wordings) is the rendering of
  one of the release's own log formats;
- every SGLang flag its parser takes is one the release's parser takes, and the routes it answers are the release's.

A failure here means the sim disagrees with the release it claims: fix the sim (its table in tui/sim/releases.py),
never the facts.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.e2e import free_port
from tests.helpers.wait import slack
from tui.lifecycle.presets import get_preset
from tui.lifecycle.presets.facts import LogFormat, ReleaseFacts, log_formats, releases
from tui.sim import server as sim_server
from tui.sim.releases import RELEASES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

CLAIMED = tuple(RELEASES)
#: the bring-up wordings of the sim, besides what the preset's markers already pick out
BRINGUP = re.compile(r"^(?:server_args=|Init |Memory baseline|Load weight|KV Cache|Memory pool|Capture |"
                     r"max_total_num_tokens=|The server is fired up)")
#: `[2026-06-02 09:00:00 TP0 EP0] ` before SGLang's message
PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z]+\d+)*\] ")
#: the sim's own options, not SGLang's
OWN = ("--sim-", "--scenario", "--time-scale", "--release", "-h", "--help")
#: a log format this short in literal text (`{}`, `{}: {}`) would "render" any line: it proves nothing
MIN_LITERAL = 10


def facts_of(version: str) -> ReleaseFacts:
    known = {f.version: f for f in releases("sglang")}
    if not known:
        pytest.skip("no SGLang release facts committed yet (tui/lifecycle/presets/facts/)")
    assert version in known, f"the sim claims SGLang {version}, which has no facts: {sorted(known)}"
    return known[version]


@dataclass
class Run:
    """What one sim of one release printed and served."""

    release: str
    lines: list[str] = field(default_factory=list)
    err: str = ""
    #: /metrics before any request, while the first one decodes, after both finished: {family: [sample, ...]}
    pages: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)  # name -> type, over every page
    answers: dict[str, int] = field(default_factory=dict)  # GET path -> status
    version: str = ""


def _get(port: int, path: str, body: Any = None) -> tuple[int, bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", None if body is None else json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _run(release: str, state: Path) -> Run:
    from prometheus_client.parser import text_string_to_metric_families

    port = free_port()
    cmd = [sys.executable, "-m", "tui.sim", "--release", release, "--port", str(port), "--time-scale", "0.05",
           "--sim-state-dir", str(state), "--tp", "2", "--enable-metrics", "--skip-server-warmup",
           "--speculative-algorithm", "EAGLE", "--cuda-graph-max-bs-decode", "16"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run = Run(release)
    errs: list[bytes] = []
    readers = [threading.Thread(target=lambda: run.lines.extend(x.decode().rstrip("\n") for x in proc.stdout or ()),
                                daemon=True),
               threading.Thread(target=lambda: errs.append(proc.stderr.read() if proc.stderr else b""),
                                daemon=True)]
    for t in readers:
        t.start()

    def page() -> dict[str, list[Any]]:
        fams = list(text_string_to_metric_families(_get(port, "/metrics")[1].decode()))
        run.families.update({f.name: f.type for f in fams})
        return {f.name: f.samples for f in fams}

    try:
        end = time.monotonic() + slack(60)
        while not any("fired up and ready" in x for x in list(run.lines)):
            if proc.poll() is not None:
                for t in readers:
                    t.join(slack(5))
                stderr = b"".join(errs).decode(errors="replace")[-2000:]
                raise AssertionError("\n".join([*run.lines[-20:], f"exit {proc.returncode}; stderr: {stderr}"]))
            assert time.monotonic() < end, "\n".join(run.lines[-20:])
            time.sleep(0.02)
        run.pages["start"] = page()
        done: list[int] = []
        chat = threading.Thread(target=lambda: done.append(_get(port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 120, "stream": True})[0]))
        chat.start()
        while not any(s.labels.get("mode") == "decode" for s in page().get("sglang:realtime_tokens", [])):
            assert time.monotonic() < end
            time.sleep(0.02)
        run.pages["decoding"] = page()
        chat.join(slack(30))
        assert done == [200]
        assert _get(port, "/generate", {"text": "abc", "sampling_params": {"max_new_tokens": 16}})[0] == 200
        run.pages["finished"] = page()
        for path in ("/health", "/health_generate", "/v1/models", "/model_info", "/get_model_info", "/server_info",
                     "/get_server_info", "/ready"):
            run.answers[path] = _get(port, path)[0]
        run.version = json.loads(_get(port, "/server_info")[1])["version"]
        proc.send_signal(signal.SIGTERM)
        proc.wait(slack(10))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(slack(5))
        for t in readers:
            t.join(slack(5))
    run.err = b"".join(errs).decode()
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    facts_of(CLAIMED[-1])  # skips before starting anything when there are no facts at all
    yield {v: _run(v, tmp_path_factory.mktemp(f"sim-{v}")) for v in CLAIMED}


def _labels(samples: list[Any]) -> set[str]:
    return {k for s in samples for k in s.labels if k not in ("le", "quantile")}


@pytest.mark.parametrize("release", CLAIMED)
def test_every_metric_family_is_the_releases_with_its_label_names(runs: dict[str, Run], release: str) -> None:
    facts, run = facts_of(release), runs[release]
    samples: dict[str, list[Any]] = {}
    for p in run.pages.values():
        for name, ss in p.items():
            samples.setdefault(name, []).extend(ss)
    bad = []
    for family, kind in sorted(run.families.items()):
        fact = facts.has_metric(family)
        if fact is None:
            bad.append(f"{family}: not a metric of {release}")
            continue
        if fact.type != kind:
            bad.append(f"{family}: a {kind}, but {release} declares a {fact.type}")
        got = _labels(samples.get(family, []))
        if fact.labels_resolved and got != set(fact.labels):
            bad.append(f"{family}: labels {sorted(got)}, {release} gives {sorted(fact.labels)}")
        elif not got >= set(fact.labels):  # labels the extractor could not resolve fully: at least those it did
            bad.append(f"{family}: labels {sorted(got)} lack some of {sorted(fact.labels)}")
    assert not bad, "\n".join(bad)
    assert run.families, "no metric family at all"


def _total(page: dict[str, list[Any]], family: str) -> float:
    return sum(s.value for s in page.get(family, []) if not s.name.endswith(("_created", "_bucket")))


@pytest.mark.parametrize("release", CLAIMED)
def test_the_counters_bumped_at_request_finish_are_the_releases_finish_counters(runs: dict[str, Run],
                                                                                 release: str) -> None:
    """Read off the sim's behaviour, not its code: a counter still at its start value while a request decodes and
    moved once it finished is counted at finish; one that moved while it decoded is counted per step."""
    facts, run = facts_of(release), runs[release]
    start, mid, end = (run.pages[k] for k in ("start", "decoding", "finished"))
    counters = [f for f, k in run.families.items() if k == "counter"]
    at_finish = {f for f in counters if _total(mid, f) == _total(start, f) < _total(end, f)}
    per_step = {f for f in counters if _total(mid, f) > _total(start, f)}
    assert {"sglang:generation_tokens", "sglang:spec_verify_calls"} <= at_finish, (at_finish, per_step)
    assert "sglang:realtime_tokens" in per_step, per_step

    def finish_method(family: str) -> bool:
        fact = facts.has_metric(family)
        assert fact is not None, family
        return any("finish" in m.rsplit(".", 1)[-1] for m in fact.updated_in)
    wrong = [f"{f}: bumped at request finish, {release} moves it in {facts.has_metric(f).updated_in}"  # type: ignore[union-attr]
             for f in sorted(at_finish) if not finish_method(f)]
    wrong += [f"{f}: bumped every step, {release} moves it at request finish only"
              for f in sorted(per_step) if finish_method(f)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("release", CLAIMED)
def test_the_arguments_line_has_the_releases_form(runs: dict[str, Run], release: str) -> None:
    facts, run = facts_of(release), runs[release]
    line = next(PREFIX.sub("", x) for x in run.lines if "server_args=" in x)
    form = {"dataclass": r"server_args=ServerArgs\(\w+=.*\)", "dict": r"server_args=\{'\w+': .*\}"}
    assert facts.args_line_form in form, f"{release}: an arguments line of form {facts.args_line_form!r}"
    assert re.fullmatch(form[facts.args_line_form], line), (facts.args_line_form, line[:120])


def _usable(formats: tuple[LogFormat, ...]) -> list[tuple[re.Pattern[str], bool]]:
    """Each format's regex, and whether it is open-ended: SGLang builds its batch lines piece by piece
    (`msg = f"Decode batch, ..., {usage}"`, then `msg += f"..."`), and the extractor keeps the first piece, which ends
    in a field or a separator; such a format renders the start of a line, not all of it."""
    out = []
    for f in formats:
        literal = re.sub(r"\{[^{}]*\}", "", f.text)
        if len(literal.strip()) >= MIN_LITERAL:
            out.append((f.regex(), f.text.endswith(("}", ", "))))
    return out


@pytest.mark.parametrize("release", CLAIMED)
def test_every_bringup_line_is_one_of_the_releases_log_formats(runs: dict[str, Run], release: str) -> None:
    facts, run = facts_of(release), runs[release]
    preset = get_preset("sglang")
    marker_rx = [m.pattern for m in preset.markers] + [preset.ready]
    formats = _usable(log_formats(facts.server, facts.version))
    checked, bad = 0, []
    for raw in run.lines:
        if not PREFIX.match(raw):
            continue  # a traceback's lines
        msg = PREFIX.sub("", raw)
        if msg.startswith("INFO:     "):
            continue  # uvicorn's own lines, not SGLang's
        if not (BRINGUP.match(msg) or any(rx.search(msg) for rx in marker_rx)):
            continue
        checked += 1
        if not any(rx.fullmatch(msg) or (open_ended and rx.match(msg)) for rx, open_ended in formats):
            bad.append(msg[:160])
    assert checked >= 10, f"only {checked} bring-up lines seen"
    assert not bad, f"{release}: lines no log format of the release renders:\n" + "\n".join(dict.fromkeys(bad))


@pytest.mark.parametrize("release", CLAIMED)
def test_the_flags_it_parses_and_the_routes_it_answers_are_the_releases(runs: dict[str, Run], release: str) -> None:
    facts, run = facts_of(release), runs[release]
    parser = sim_server.build_parser(RELEASES[release])
    spellings = [s for a in parser._actions for s in a.option_strings if not s.startswith(OWN)]
    refused = [s for s in spellings if not facts.accepts(s)]
    assert not refused, f"{release} refuses flags the sim takes: {refused}"
    # the retired spellings of any claimed release: taken (with a warning) exactly where the release takes them
    for flag in sorted({f for r in RELEASES.values() for f in r.aliases}):
        sim_takes = flag in spellings
        assert sim_takes == facts.accepts(flag), f"{release}: the sim {'takes' if sim_takes else 'refuses'} {flag}"
        option = facts.option(flag)
        assert not sim_takes or (option is not None and option.deprecated), f"{release}: {flag} is not deprecated"
    assert run.version == release
    served = {p for p, code in run.answers.items() if code == 200}
    if facts.routes:
        assert served <= set(facts.routes), f"routes {release} does not have: {sorted(served - set(facts.routes))}"
        assert ("/ready" in served) == ("/ready" in facts.routes)
