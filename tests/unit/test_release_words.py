"""The server's release, from what it says (issue 29): vLLM's release line in each of its wordings, SGLang's server
info, the first release a run states kept and a new run starting unknown, an answer that is not this run's
dropped, the query asked once a run; and the header and `status` naming it with how sure its facts are. Against the
simulated server and the console's engine: tests/e2e/test_release_detect.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from string import Template
from typing import Any

import pytest

from tests.helpers.reducer_events import SGLANG
from tui.cli.report import render_status, snapshot_dict
from tui.collectors.probes import Prober
from tui.engine.server_version import RETRY_S, ReleaseQuery
from tui.lifecycle.presets import get_preset
from tui.lifecycle.presets.facts import ReleaseFacts, ReleaseMatch, resolve
from tui.lifecycle.reducer import LifecycleState, initial, reduce, reduce_lines
from tui.lifecycle.replay import replay
from tui.lifecycle.server_version import MAX_VERSION, release_in_line, release_version
from tui.model import (
    LogLine,
    Phase,
    ProbeResult,
    ReleaseReported,
    ReleaseSeen,
    ReleaseSource,
    Snapshot,
    UnitObserved,
    UnitState,
)
from widgets import lifecycle as lifecycle_widget
from widgets.lifecycle import release_text

VLLM = get_preset("vllm")


FIXTURES = Path(__file__).parents[1] / "fixtures" / "logs"


#: vllm 0.34.0 vllm/logger.py `_FORMAT`: "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s
#: [%(fileinfo)s:%(lineno)d] %(message)s"
API = "(APIServer pid=4242) INFO 05-07 04:54:33 [api_server.py:1896] "


CORE = "(EngineCore_DP0 pid=4300) INFO 05-07 04:54:40 [core.py:77] "


#: vllm 0.8.5 vllm/logger.py `_FORMAT`: "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s"
OLD = "INFO 05-07 04:54:33 [api_server.py:1043] "


#: vllm 0.8.5, 0.9.2, 0.10.2, 0.11.0 vllm/entrypoints/openai/api_server.py (run_server_worker)
API_SERVER_VERSION = "vLLM API server version %s"


#: vllm 0.15.0 vllm/entrypoints/utils.py, 0.25.0 vllm/entrypoints/serve/utils/api_utils.py, 0.34.0
#: vllm/entrypoints/common/startup.py (log_version_and_model, VLLM_DISABLE_LOG_LOGO or no vLLM formatter)
SERVER_VERSION = "vLLM server version %s, serving model %s"


#: the same function's logo, 0.34.0 vllm/entrypoints/common/startup.py
LOGO = Template("\n       ${w}█     █     █▄   ▄█${r}\n"
                " ${o}▄▄${r} ${b}▄█${r} ${w}█     █     █ ▀▄▀ █${r}  version ${w}%s${r}\n"
                "  ${o}█${r}${b}▄█▀${r} ${w}█     █     █     █${r}  model   ${w}%s${r}\n"
                "   ${b}▀▀${r}  ${w}▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀${r}\n")


#: its colours, 0.34.0 (0.15.0 and 0.20.0 wrote white as "\033[97;1m")
COLOURS = {"w": "\033[1m", "o": "\033[93m", "b": "\033[94m", "r": "\033[0m"}


#: vllm 0.8.5 ... 0.34.0 vllm/v1/engine/core.py (EngineCore.__init__)
V1_ENGINE = "Initializing a V1 LLM engine (v%s) with config: %s"


#: vllm 0.8.5, 0.9.2, 0.10.2 vllm/engine/llm_engine.py (LLMEngine.__init__)
V0_ENGINE = "Initializing a V0 LLM engine (v%s) with config: %s, use_cached_outputs=%s, "


#: vllm 0.15.0 ... 0.34.0 vllm/entrypoints/cli/serve.py (run_headless)
HEADLESS = ("Launching vLLM (v%s) headless multiproc executor, with head node address %s for torch.distributed "
            "process group.")


def newline_formatted(prefix: str, message: str) -> list[str]:
    """A multi-line message as vLLM's NewLineFormatter writes it (0.34.0 vllm/logging_utils/formatter.py: every
    "\\n" becomes "\\r\\n" and the record's prefix), split into lines as the log reader splits them."""
    return (prefix + message.replace("\n", "\r\n" + prefix)).split("\r\n")


def vllm_lines(version: str) -> dict[str, list[str]]:
    model = "/models/Qwen2.5-0.5B"
    return {
        "api server (0.8.5-0.11)": [API + API_SERVER_VERSION % version],
        "api server, old prefix (0.8.5)": [OLD + API_SERVER_VERSION % version],
        "server version (0.15+)": [API + SERVER_VERSION % (version, model)],
        "logo (0.15+)": newline_formatted(API, LOGO.substitute(dict.fromkeys(COLOURS, "")) % (version, model)),
        "logo in colour (0.15+)": newline_formatted(API, LOGO.substitute(COLOURS) % (version, model)),
        "V1 engine core": [CORE + V1_ENGINE % (version, "model='/models/Qwen2.5-0.5B', speculative_config=None")],
        "V0 engine (0.8.5-0.10)": [OLD + V0_ENGINE % (version, "model='/models/Qwen2.5-0.5B'", True)],
        "headless node (0.15+)": [API + HEADLESS % (version, "10.0.0.1:29500")],
    }


def lines_of(texts: list[str], invocation: str = "run-1", at: float = 100.0) -> list[LogLine]:
    return [LogLine(at + i * 0.01, t, invocation) for i, t in enumerate(texts)]


def fold(texts: list[str], preset: Any = VLLM, s: LifecycleState | None = None, **kw: Any) -> LifecycleState:
    """Line by line, and in one fold: the same state (the fast path must not skip a release line)."""
    s = s or initial()
    one = s
    for ev in lines_of(texts, **kw):
        one = reduce(one, ev, preset)
    many = reduce_lines(s, lines_of(texts, **kw), preset)
    assert one.release == many.release
    return one


VERSIONS = ["0.8.5", "0.10.1.1", "0.11.0rc2", "0.34.0", "0.10.2.dev378+g4d7fe40fc.d20250829"]


def running(s: LifecycleState, invocation: str = "run-1", at: float = 100.0) -> LifecycleState:
    return reduce(s, UnitObserved(at, UnitState("active", "running", 4242, invocation, started_at=at)), SGLANG)


READY_LINE = "[2026-01-10 13:23:30] The server is fired up and ready to roll!"


def sglang_ready(invocation: str = "run-1") -> LifecycleState:
    s = running(initial())
    return fold(["[2026-01-10 13:23:20] Load weight begin. avail mem=139.0 GB", READY_LINE], SGLANG, s,
                invocation=invocation, at=110.0)


def answer(version: str, *, at: float, latency: float = 0.05, invocation: str = "run-1") -> ReleaseReported:
    return ReleaseReported(at=at, version=version, path="/server_info", invocation=invocation, latency_s=latency)


def facts_of(version: str, server: str = "vllm") -> ReleaseFacts:
    return ReleaseFacts(server=server, version=version, wheel_file="", wheel_sha256="", allow_abbrev=True,
                        underscore_spellings=False, options=(), positionals=(), metrics=(),
                        args_line_form="unknown", routes=(), version_line=None)


def snapshot_with(seen: ReleaseSeen | None) -> Snapshot:
    return Snapshot(deployment="sim", host="simhost", phase=Phase.READY, invocation="run-1", timeline=(),
                    failure=None, stalled_for=None, unit=None, gpus=None, throughput=None, release_seen=seen,
                    release=resolve("sglang", seen.version) if seen is not None else None)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("wording", list(vllm_lines("0")))
def test_vllm_states_its_release_in_each_wording_of_its_releases(wording: str, version: str) -> None:
    texts = vllm_lines(version)[wording]
    s = fold(["(APIServer pid=4242) INFO 05-07 04:54:30 [utils.py:328] non-default args: {'model': 'x'}", *texts])
    assert s.release is not None, texts
    assert s.release.version == version and s.release.source == ReleaseSource.LOG
    assert s.release.at >= 100.0
    assert s.phase == Phase.STARTING  # the release changes no phase


def test_the_recorded_vllm_log_names_its_release_and_no_sglang_log_a_release() -> None:
    """Every recorded log of tests/fixtures: a release found is the one its header names (the server's own line),
    and none is ever found in a log that does not state one (every SGLang log: its release never logs it)."""
    checked = 0
    for path in sorted(FIXTURES.glob("*.log")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        # `# server: vllm 0.10.2.dev378+...`, or `# source: rendered from vllm 0.34.0 format strings: ...`
        said = next((m for ln in lines[:3] if (m := re.search(r"(?:# server: |rendered from )(\w+) (\S+)", ln))),
                    None)
        server, version = (said[1], said[2]) if said else ("auto", "unknown")
        r = replay([ln for ln in lines if not ln.startswith("# ")], server)
        if r.state.release is None:
            assert server != "vllm" or version == "unknown" or not any(
                VLLM.version_line.search(ln) for ln in lines if VLLM.version_line is not None), path.name
            continue
        checked += 1
        assert r.state.release.version == version, (path.name, r.state.release)
    assert checked >= 1  # vllm_v010_starting_args.log: `vLLM API server version 0.10.2.dev378+g4d7fe40fc.d20250829`


def test_sglang_has_no_release_line_and_asks_its_server_info() -> None:
    assert SGLANG.version_line is None
    assert SGLANG.version_paths == ("/server_info", "/get_server_info") and SGLANG.version_key == "version"
    assert VLLM.version_paths == ("/version",) and VLLM.version_key == "version"


def test_a_run_keeps_the_first_release_it_states_and_a_new_run_starts_unknown() -> None:
    s = fold([API + API_SERVER_VERSION % "0.10.1.1", CORE + V1_ENGINE % ("0.10.1.1", "x")])
    assert s.release is not None and s.release.evidence.endswith("vLLM API server version 0.10.1.1")
    # the next run (another invocation): nothing of the last one's release, until it says its own
    s2 = fold(["(APIServer pid=5000) INFO 05-07 05:00:00 [utils.py:328] non-default args: {}"], s=s,
              invocation="run-2", at=200.0)
    assert s2.invocation == "run-2" and s2.release is None
    s3 = fold([API + SERVER_VERSION % ("0.34.0", "m")], s=s2, invocation="run-2", at=201.0)
    assert s3.release is not None and s3.release.version == "0.34.0"


def test_a_line_that_only_looks_like_one_says_nothing() -> None:
    s = fold([API + "vLLM API server version unknown", API + "Initializing a V1 LLM engine (vdev) with config: x",
              API + "vLLM server version [bold]0.1[/bold], serving model m"])
    assert s.release is None


def test_release_strings_are_plain_and_bounded() -> None:
    assert release_version("0.5.23") == "0.5.23"
    assert release_version(" v0.5.5.post1 ") == "0.5.5.post1"
    assert release_version("0.5.23-sim") == "0.5.23-sim"
    assert release_version("0.10.2.dev378+g4d7fe40fc.d20250829") == "0.10.2.dev378+g4d7fe40fc.d20250829"
    for bad in ("", "latest", "0", "[red]0.5.23[/red]", "0.5.23\x1b[2J", "0.5.23 ; rm", "0.5.\n23", "0.5.23.",
                "1." + "1" * MAX_VERSION):
        assert release_version(bad) is None, bad
    wordings = VLLM.version_line
    assert wordings is not None
    assert release_in_line("vLLM API server version 0.9.2.", wordings) == "0.9.2"
    assert release_in_line("vLLM API server version " + "1." * 40 + "1", wordings) is None


def test_the_http_answer_of_the_run_is_its_release() -> None:
    s = sglang_ready()
    ready = s.ready_line_at
    assert ready is not None and s.release is None
    s = reduce(s, answer("0.5.23", at=ready + 1.0), SGLANG)
    assert s.release == ReleaseSeen("0.5.23", ReleaseSource.HTTP, ready + 1.0, "/server_info")


@pytest.mark.parametrize("why", ["another run", "sent before the run began", "sent before its ready line",
                                 "not a release", "markup"])
def test_an_answer_that_is_not_this_runs_release_is_dropped(why: str) -> None:
    s = sglang_ready()
    ready = s.ready_line_at
    assert ready is not None
    ev = {"another run": answer("0.5.23", at=ready + 1, invocation="run-0"),
          "sent before the run began": answer("0.5.22", at=ready + 1, latency=ready + 1 - 99.0),
          "sent before its ready line": answer("0.5.22", at=ready + 0.5, latency=1.0),
          "not a release": answer("unknown", at=ready + 1),
          "markup": answer("[link=http://x]0.5.23[/link]", at=ready + 1)}[why]
    assert reduce(s, ev, SGLANG).release is None


def test_a_release_the_log_stated_stands_against_a_later_answer() -> None:
    s = running(initial(), at=90.0)
    s = fold([API + API_SERVER_VERSION % "0.10.1.1", API + "Application startup complete."], VLLM, s)
    s2 = reduce(s, ReleaseReported(at=120.0, version="0.10.2", path="/version", invocation="run-1"), VLLM)
    assert s2.release is not None and s2.release.version == "0.10.1.1" and s2.release.source == ReleaseSource.LOG


def test_the_query_asks_once_a_run_once_it_is_ready() -> None:
    q = ReleaseQuery()
    paths = SGLANG.version_paths
    starting = running(initial())
    assert not q.due(starting, paths, 105.0)  # the port may still be the last run's
    ready = sglang_ready()
    assert q.due(ready, paths, 111.0)
    q.asking(ready)
    assert not q.due(ready, paths, 112.0) and not q.due(ready, paths, 10_000.0)  # answered (without a release)
    q.unanswered(112.0)  # ... or no answer at all: asked again, later
    assert not q.due(ready, paths, 112.0 + RETRY_S - 1) and q.due(ready, paths, 112.0 + RETRY_S)
    known = reduce(ready, answer("0.5.23", at=111.5), SGLANG)
    assert not q.due(known, paths, 112.0 + RETRY_S)
    assert not q.due(ready, (), 111.0)  # a server with nowhere to ask
    other = fold([READY_LINE], SGLANG, running(ready, "run-2", at=300.0), invocation="run-2", at=310.0)
    q.asking(ready)
    assert q.due(other, paths, 311.0)  # a new run is asked again


async def test_the_prober_says_when_nothing_answered() -> None:
    p = Prober("http://127.0.0.1:1", timeout=0.5)  # nothing listens on port 1
    try:
        r = await p.release(VLLM.version_paths, VLLM.version_key, "run-1")
    finally:
        await p.close()
    assert isinstance(r, ProbeResult) and r.status is None and r.kind == "release"


def test_the_header_says_the_release_and_how_sure_the_facts_are(monkeypatch: pytest.MonkeyPatch) -> None:
    known = (facts_of("0.8.5"), facts_of("0.11.0"), facts_of("0.34.0"))
    monkeypatch.setattr(lifecycle_widget, "known_versions", lambda server: tuple(f.version for f in known))
    assert release_text(None, "vLLM") == ""  # not said yet: nothing, no guess
    assert release_text(ReleaseMatch(known[2], "0.34.0", True, ""), "vLLM") == "vLLM 0.34.0"
    assert release_text(ReleaseMatch(None, "0.5.23", False, "no release facts for sglang"), "SGLang") == \
        "SGLang 0.5.23"
    assert release_text(ReleaseMatch(known[2], "0.35.0", False, "newer"), "vLLM") == \
        "vLLM 0.35.0 · newer than known: facts of 0.34.0"
    assert release_text(ReleaseMatch(known[0], "0.7.3", False, "older"), "vLLM") == \
        "vLLM 0.7.3 · older than known: facts of 0.8.5"
    assert release_text(ReleaseMatch(known[1], "0.12.0", False, "between"), "vLLM") == \
        "vLLM 0.12.0 · no facts of its own: facts of 0.11.0"
    long = "0." + "1" * 60
    assert len(release_text(ReleaseMatch(None, long, False, ""), "vLLM")) <= len("vLLM ") + 40


def test_status_says_the_release_and_its_facts() -> None:
    none = snapshot_dict(snapshot_with(None), {}, 0.0)
    assert none["release"] is None and "release:" not in render_status(none)
    d = snapshot_dict(snapshot_with(ReleaseSeen("0.5.23", ReleaseSource.HTTP, 1.0, "/server_info")), {}, 0.0)
    m = resolve("sglang", "0.5.23")  # with the facts files or without: the JSON says which
    assert d["release"] == {"version": "0.5.23", "source": "http",
                            "facts": m.facts.version if m.facts is not None else None, "exact": m.exact,
                            "note": m.note}
    json.dumps(d)
    assert "release: 0.5.23 (said by its HTTP answer" in render_status(d)
