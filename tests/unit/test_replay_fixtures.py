"""Replay (tui/lifecycle/replay.py) over real public logs, against what a human concluded (`bringup replay` itself,
a process of its own: tests/e2e/test_replay_cli.py).

tests/fixtures/logs/expected.json holds, per log, the preset, final phase, phases seen, failure kind/phase and
substrings the failure excerpt must contain. The reducer only moves forward, so repeated or backward phases in
the expectation (vLLM V1 goes compile -> KV sizing -> graph capture) are dropped before comparing timelines.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.lifecycle.journal import journal_message
from tui.lifecycle.replay import events_from_lines, replay
from tui.model import PROGRESS_ORDER, FailureKind, LogLine, Phase, UnitObserved

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
EXPECTED: dict[str, dict] = json.loads((LOGS / "expected.json").read_text(encoding="utf-8"))
_RANK = {str(p): i for i, p in enumerate(PROGRESS_ORDER)}


def _replay(name: str):
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    return replay(lines)


def forward_only(phases: list[str]) -> list[str]:
    """The phases a forward-only reducer can show for a human's list: repeats and backward steps dropped."""
    out: list[str] = []
    best = -1
    for p in phases:
        if p in ("failed", "stopped"):
            out.append(p)
            break
        if p == "stopping":  # a clean shutdown: only its end can follow
            out.append(p)
            best = len(_RANK)
            continue
        r = _RANK[p]
        if r > best:
            out.append(p)
            best = r
    return out


def _drop_leading_starting(phases: list[str]) -> list[str]:
    return phases[1:] if phases and phases[0] == "starting" else phases


def test_every_fixture_log_has_an_expectation() -> None:
    logs = {p.name for p in LOGS.glob("*.log")}
    assert logs == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_outcome(name: str) -> None:
    exp = EXPECTED[name]
    r = _replay(name)
    d = r.as_dict()
    assert r.preset == exp["preset"], "preset detection"
    assert d["final"] == exp["final"]
    if exp["failure_kind"] is None:
        assert d["failure"] is None
        return
    f = d["failure"]
    assert f is not None
    assert f["kind"] == exp["failure_kind"]
    assert f["phase"] == exp["failure_phase"]
    for needle in exp["must_contain_in_excerpt"]:
        assert needle in f["excerpt"]
    assert f["hint"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_timeline(name: str) -> None:
    r = _replay(name)
    got = _drop_leading_starting([str(t.phase) for t in r.state.timeline])
    want = _drop_leading_starting(forward_only(EXPECTED[name]["phases"]))
    assert got == want


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_log_as_bringup_stores_it_replays_like_the_original(name: str) -> None:
    """A `process` deployment's log (under the state dir) has each line stamped `<epoch> `: replaying it must
    give the original's phases and failure, without the stamps in the excerpt."""
    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    stored = [f"{1795974750.5 + i * 0.25:.6f} {line}" for i, line in enumerate(lines)]
    want, got = replay(lines).as_dict(), replay(stored).as_dict()
    assert [str(t.phase) for t in replay(stored).state.timeline] == [str(t.phase) for t in replay(lines).state.timeline]
    assert got["final"] == want["final"]
    if want["failure"] is not None:
        assert got["failure"] is not None
        assert (got["failure"]["kind"], got["failure"]["phase"]) == (want["failure"]["kind"], want["failure"]["phase"])
        assert not any(x.startswith("17959") for x in got["failure"]["excerpt"]), got["failure"]["excerpt"]


def test_forward_only_helper() -> None:
    assert forward_only(["graph-capture", "loading", "graph-capture", "warmup"]) == ["graph-capture", "warmup"]
    assert forward_only(["starting", "loading", "failed"]) == ["starting", "loading", "failed"]
    assert forward_only(["ready", "stopping", "ready", "stopped"]) == ["ready", "stopping", "stopped"]


# ------------------------------------------------------------------------------------------------ journald JSON

# the K2.6 DFlash unit and line, as `journalctl -o json` prints them
_INV = "c0ffee0123456789abcdef0123456789"


def _jline(msg: object, ts_us: int, **fields: object) -> str:
    obj = {"__REALTIME_TIMESTAMP": str(ts_us), "MESSAGE": msg, "__CURSOR": f"s=abc;i={ts_us:x}", **fields}
    return json.dumps(obj)


def test_journal_json_byte_array_message_decodes_with_replacement() -> None:
    text = "[2026-05-29 16:59:48 TP0 EP0] Load weight begin. avail mem=94.00 GB "
    msg = [*text.encode(), 0xFF, 0xFE, *b"tail"]
    raw = _jline(msg, 1_780_073_988_000_000, _PID="106324", _SYSTEMD_INVOCATION_ID=_INV)
    assert journal_message(json.loads(raw)) == text + "\ufffd\ufffdtail"
    evs = list(events_from_lines([raw]))
    assert len(evs) == 1
    ev = evs[0]
    assert isinstance(ev, LogLine)
    assert ev.text == text + "\ufffd\ufffdtail"
    assert ev.invocation == _INV
    assert ev.at == pytest.approx(1_780_073_988.0)
    r = replay([raw])
    assert r.state.phase == Phase.LOADING


@pytest.mark.parametrize("msg", [["a", "b"], [[1, 2]], [None], {"x": 1}, None, 12, [1.5, 300, -1]])
def test_journal_json_odd_messages_do_not_raise(msg: object) -> None:
    list(events_from_lines([_jline(msg, 1_000_000, _PID="7")]))


@pytest.mark.parametrize("systemd_fields", [
    {"_PID": "1", "SYSLOG_IDENTIFIER": "systemd", "UNIT": "sglang-k26-dflash.service", "INVOCATION_ID": _INV},
    {"_PID": "1"},
], ids=["as-journald-writes-it", "pid-1-only"])
def test_systemd_main_process_exited_after_loading_is_failed_exit(systemd_fields: dict[str, str]) -> None:
    lines = [
        _jline("[2026-05-29 16:59:48 TP0 EP0] Load weight begin. avail mem=94.00 GB", 1_780_073_988_000_000,
               _PID="106324", _SYSTEMD_INVOCATION_ID=_INV),
        _jline("[2026-05-29 17:01:02 TP0 EP0] Load weight end. elapsed=73.65 s, type=KimiK25ForConditionalGeneration,"
               " quant=compressed-tensors, avail mem=21.76 GB, mem usage=72.24 GB.", 1_780_074_062_000_000,
               _PID="106324", _SYSTEMD_INVOCATION_ID=_INV),
        # systemd (PID 1) about the unit: no _SYSTEMD_INVOCATION_ID, but INVOCATION_ID of the unit's run
        _jline("sglang-k26-dflash.service: Main process exited, code=exited, status=1/FAILURE",
               1_780_074_300_000_000, **systemd_fields),
        _jline("sglang-k26-dflash.service: Failed with result 'exit-code'.", 1_780_074_300_000_100,
               **systemd_fields),
    ]
    evs = list(events_from_lines(lines))
    assert isinstance(evs[2], UnitObserved)
    assert evs[2].unit.exit_status == 1
    r = replay(lines)
    s = r.state
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert s.failure.kind == FailureKind.EXIT
    assert s.failure.phase == Phase.LOADING
    d = r.as_dict()
    assert d["final"] == "failed"


def test_mixed_plain_and_json_lines() -> None:
    lines = [
        "# source: test",
        "May 29 17:01:02 dflash-train python[106324]: [2026-05-29 17:01:02 TP0 EP0] Load weight end. elapsed=73.65 s",
        "{not json at all",
        _jline("[2026-05-29 17:03:02 TP0 EP0] Capture cuda graph begin. This can take up to several minutes.",
               1_780_074_182_000_000, _PID="106324"),
    ]
    r = replay(lines)
    assert r.state.phase == Phase.GRAPH_CAPTURE


# ------------------------------------------------------------------------------------------------ robustness


def test_binary_garbage_does_not_crash(tmp_path: Path) -> None:
    data = bytes(range(256)) * 200 + os.urandom(50_000)
    lines = data.decode("utf-8", "replace").splitlines()
    r = replay(lines)
    assert isinstance(r.state.phase, Phase)
    r.as_dict()


def test_five_megabyte_single_line_does_not_crash() -> None:
    r = replay(["[2026-06-02 08:00:20 TP0 EP0] Scheduler hit an exception: " + "y" * 5_000_000])
    assert r.state.phase == Phase.FAILED
    assert r.state.failure is not None
    assert sum(len(x) for x in r.state.failure.excerpt) < 100_000
    r = replay(["z" * 5_000_000])
    assert isinstance(r.state.phase, Phase)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=200),
    st.dictionaries(st.sampled_from(["MESSAGE", "__REALTIME_TIMESTAMP", "_PID", "_SYSTEMD_INVOCATION_ID",
                                     "SYSLOG_IDENTIFIER", "INVOCATION_ID", "__CURSOR"]),
                    st.one_of(st.text(max_size=50), st.integers(), st.none(), st.lists(st.integers(-5, 300)),
                              st.sampled_from(["1", "systemd", "Main process exited, code=killed, status=9/KILL",
                                               "Started x.service.", "Failed with result 'signal'."])),
                    ).map(json.dumps),
), max_size=20))
def test_replay_never_raises(lines: list[str]) -> None:
    r = replay(lines)
    assert isinstance(r.state.phase, Phase)
    json.dumps(r.as_dict())


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(EXPECTED)), cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=30),
       probe=st.booleans())
def test_reduce_lines_is_reduce_line_by_line(name: str, cuts: list[int], probe: bool) -> None:
    """The engine folds bursts of lines with `reduce_lines`; on every real log, cut into random batches (with the
    unit's events between them, as the engine feeds them), the state is the one line-by-line `reduce` gives."""
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.reducer import initial, reduce, reduce_lines
    from tui.lifecycle.replay import detect_preset

    lines = (LOGS / name).read_text(encoding="utf-8").splitlines()
    preset = get_preset(detect_preset(lines))
    events = list(events_from_lines(lines))
    one = batched = initial(require_probe=probe)
    batch: list[LogLine] = []
    cut_at = set(cuts)
    for i, ev in enumerate(events):
        one = reduce(one, ev, preset)
        if isinstance(ev, LogLine):
            batch.append(ev)
        else:
            batched = reduce(reduce_lines(batched, batch, preset), ev, preset)
            batch = []
        if i in cut_at:
            batched, batch = reduce_lines(batched, batch, preset), []
            assert batched == one, f"{name}: differs after event {i}"
    assert reduce_lines(batched, batch, preset) == one


# ------------------------------------------------------------------------------------------------ systemd as text

# systemd's own words as journald's short format prints them (shivasiddharth/GassistPi#1070, michael-lazar/jetforce#55),
# around the K2.6 deployment's lines
_SD = "May 29 {t} dflash-train systemd[1]: "
_PY = "May 29 {t} dflash-train python3[106324]: "


def _sd(t: str, msg: str) -> str:
    return _SD.format(t=t) + msg


def _py(t: str, msg: str) -> str:
    return _PY.format(t=t) + msg


_LOAD = "[2026-05-29 16:59:48 TP0 EP0] Load weight begin. avail mem=94.00 GB"


def test_systemd_text_lines_are_unit_events_for_any_process_name() -> None:
    lines = [
        _sd("16:59:40", "Started sglang-k26-dflash.service - SGLang K2.6 DFlash."),
        "May 29 16:59:48 dflash-train bash[106324]: " + _LOAD,
        _sd("17:00:03", "sglang-k26-dflash.service: Main process exited, code=exited, status=1/FAILURE"),
        _sd("17:00:03", "sglang-k26-dflash.service: Failed with result 'exit-code'."),
    ]
    evs = list(events_from_lines(lines))
    assert [type(e).__name__ for e in evs] == ["UnitObserved", "LogLine", "UnitObserved", "UnitObserved"]
    s = replay(lines).state
    assert s.phase == Phase.FAILED
    assert s.failure is not None and (s.failure.kind, s.failure.phase) == (FailureKind.EXIT, Phase.LOADING)
    assert "exited with status 1" in s.failure.excerpt[-1]
    # the same lines pasted without journald's prefix: systemd's words still name the unit
    bare = [x.split(": ", 1)[1] for x in lines]
    assert replay(bare).state.phase == Phase.FAILED


def test_systemd_scheduled_restart_starts_again() -> None:
    lines = [
        _py("16:59:48", _LOAD),
        _sd("17:00:03", "sglang-k26-dflash.service: Main process exited, code=exited, status=1/FAILURE"),
        _sd("17:00:03", "sglang-k26-dflash.service: Failed with result 'exit-code'."),
        _sd("17:00:08", "sglang-k26-dflash.service: Scheduled restart job, restart counter is at 1."),
        _sd("17:00:08", "Stopped SGLang K2.6 DFlash."),
        _sd("17:00:08", "Started SGLang K2.6 DFlash."),
    ]
    s = replay(lines).state
    assert s.phase == Phase.STARTING and s.failure is None
    s = replay([*lines, _py("17:00:20", _LOAD)]).state
    assert s.phase == Phase.LOADING


@pytest.mark.parametrize(("last", "phase"), [
    (["Stopping SGLang K2.6 DFlash...",
      "sglang-k26-dflash.service: Main process exited, code=exited, status=137/n/a",
      "sglang-k26-dflash.service: Failed with result 'exit-code'.", "Stopped SGLang K2.6 DFlash."], Phase.STOPPED),
    (["sglang-k26-dflash.service: Main process exited, code=killed, status=15/TERM",
      "sglang-k26-dflash.service: Deactivated successfully."], Phase.STOPPED),
    (["sglang-k26-dflash.service: Main process exited, code=killed, status=9/KILL",
      "sglang-k26-dflash.service: Failed with result 'signal'."], Phase.FAILED),
])
def test_systemd_stops_and_kills(last: list[str], phase: Phase) -> None:
    s = replay([_sd("16:59:40", "Started SGLang K2.6 DFlash."), _py("16:59:48", _LOAD),
                *[_sd("17:10:00", x) for x in last]]).state
    assert s.phase == phase
    if phase == Phase.FAILED:
        assert s.failure is not None and "killed by signal 9, SIGKILL" in s.failure.excerpt[-1]


def test_systemd_words_about_other_units_are_not_this_runs() -> None:
    # `journalctl` without `-u`: a login session starting is not the server starting again
    s = replay([_py("16:59:48", _LOAD), _sd("17:00:00", "Started Session 3 of User root.")]).state
    assert s.phase == Phase.LOADING


def test_uvicorn_words_are_not_systemds() -> None:
    # sglang #2468's uvicorn line starts with `Started` too, but it is the server's
    evs = list(events_from_lines(["INFO:     Started server process [3831493]",
                                  "Started server process [3831493]"]))
    assert all(isinstance(e, LogLine) for e in evs)


def test_vllms_logger_prefix_alone_tells_the_preset() -> None:
    """tests/fixtures/logs/vllm_v1_uvicorn_first_request.log without its header: no line says "vllm", but vLLM's
    `INFO 01-31 19:05:39 file.py:N] ` prefix is vLLM's alone, so `Application startup complete.` is its ready line."""
    lines = (LOGS / "vllm_v1_uvicorn_first_request.log").read_text(encoding="utf-8").splitlines()
    body = [x for x in lines if not x.startswith("# ")]
    assert not any("vllm" in x.lower() for x in body)
    r = replay(body)
    assert r.preset == "vllm"
    assert r.state.phase == Phase.READY


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_phase_of_a_real_log_lasts_longer_than_the_log(name: str) -> None:
    """Lines before the first timestamped one (an NCCL banner, uvicorn's `INFO:` lines) take its time: they once
    took their line number, and the next stamp made a phase of 55 years."""
    s = _replay(name).state
    times = [t.at for t in s.timeline]
    assert all(b - a < 86400 for a, b in itertools.pairwise(times)), [(t.phase, t.at) for t in s.timeline]
