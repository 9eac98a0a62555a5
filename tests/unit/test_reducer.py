"""The lifecycle reducer (tui/lifecycle/reducer.py): the rules that keep the phase honest.

Log lines use real wordings quoted from SGLang and vLLM sources and issues (section and source cited per constant);
the rank prefixes are SGLang's (`[ts TPn EPn]`, the released wheels). Event times are plain seconds: the reducer only
uses the events' own `at`, never the line's prefix or a clock.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.reducer_events import (
    CAPTURE_BEGIN,
    DECODE_LINE,
    DFLASH_ARGV,
    INV,
    LOAD_BEGIN,
    LOAD_END,
    OOM_TRACEBACK,
    READY_LINE,
    REPLAY_TRACEBACK,
    SCHED_EXC,
    SGLANG,
    UVICORN_STARTED,
    VLLM,
    feed,
    gen,
    line,
    loading,
    phases,
    unit,
    warmup_seen,
)
from tui.lifecycle.reducer import MAX_EXCERPT, MemoryObserved, initial, reduce
from tui.model import (
    ActionTaken,
    Event,
    FailureKind,
    FlagsKnown,
    LogLine,
    LogSourceKnown,
    Phase,
    ProbeRequired,
    ProbeResult,
    Tick,
    UnitObserved,
    UnitState,
)

# ------------------------------------------------------------------------------------------------ ready


def test_phases_move_forward_through_startup() -> None:
    s = feed(warmup_seen())
    assert phases(s) == [Phase.STARTING, Phase.LOADING, Phase.GRAPH_CAPTURE, Phase.WARMUP]
    assert s.phase == Phase.WARMUP
    # a loading line after capture began does not move the phase back
    s = feed([line(106, LOAD_END)], s)
    assert s.phase == Phase.WARMUP


def test_ready_needs_ready_line_and_generation_after_it() -> None:
    s = feed(warmup_seen())
    assert s.phase == Phase.WARMUP, "the ready line alone is not ready"
    s = feed([gen(106)], s)
    assert s.phase == Phase.READY
    assert phases(s)[-1] == Phase.READY


def test_generation_without_ready_line_is_not_ready() -> None:
    s = feed([*loading(), line(102, LOAD_END), line(103, UVICORN_STARTED), gen(104), gen(105)])
    assert s.phase == Phase.WARMUP
    # the ready line then arrives: a generation at/after it is still needed
    s = feed([line(106, READY_LINE)], s)
    assert s.phase == Phase.WARMUP
    s = feed([gen(107)], s)
    assert s.phase == Phase.READY


def test_generation_probe_at_ready_line_time_counts() -> None:
    s = feed([*loading(), gen(105), line(105, READY_LINE)])
    assert s.phase == Phase.READY


def test_generation_probe_before_ready_line_delivered_late_is_not_ready() -> None:
    # regression: _on_probe did not compare the probe's time with the ready line's
    s = feed([*warmup_seen(), ProbeResult(at=103.0, kind="generate", ok=True, status=200)])
    assert s.phase == Phase.WARMUP


@pytest.mark.parametrize("kind", ["models", "health", "connect"])
def test_non_generation_probes_never_give_ready(kind: str) -> None:
    s = feed(warmup_seen())
    for i in range(5):
        s = feed([ProbeResult(at=110.0 + i, kind=kind, ok=True, status=200)], s)
    assert s.phase == Phase.WARMUP
    # even when logs are unavailable and a probe is all the evidence there is (after a restart an old process
    # still answers /v1/models after a restart)
    s = feed([unit(100, started=100), ProbeResult(101, kind, True, 200)], logs_available=False)
    assert s.phase != Phase.READY
    s = feed([gen(102)], s)
    assert s.phase == Phase.READY


def test_generation_probe_before_invocation_start_is_ignored() -> None:
    # the unit is seen at 110 but its invocation started at 100; the probe that succeeded at 95 hit the old process
    s = feed([unit(110, started=100), line(111, LOAD_BEGIN), line(112, READY_LINE)])
    assert s.invocation_started == 100
    s = feed([ProbeResult(95.0, "generate", True, 200)], s)
    assert s.phase == Phase.WARMUP
    s = feed([gen(113)], s)
    assert s.phase == Phase.READY


def test_failed_generation_probe_does_not_give_ready() -> None:
    s = feed([*warmup_seen(), gen(106, ok=False), gen(107, ok=False)])
    assert s.phase == Phase.WARMUP


def test_new_invocation_forgets_the_old_readiness() -> None:
    s = feed([*warmup_seen(), gen(106)])
    assert s.phase == Phase.READY
    s = feed([unit(200, inv="second-run", started=200)], s)
    assert s.phase == Phase.STARTING
    assert s.invocation == "second-run"
    s = feed([line(201, LOAD_BEGIN, inv="second-run"), gen(202)], s)
    assert s.phase == Phase.LOADING


# ------------------------------------------------------------------------------------------------ invocations


def test_lines_from_older_invocation_are_ignored() -> None:
    s = feed([unit(100, inv="new-run", started=100), line(101, LOAD_BEGIN, inv="new-run")])
    # the old run's last words arrive late (journal lag): fatal text, earlier than the new run's start
    s = feed([line(95, SCHED_EXC, inv="old-run"), line(96, OOM_TRACEBACK[-1], inv="old-run")], s)
    assert s.phase == Phase.LOADING
    assert s.failure is None
    assert s.invocation == "new-run"


def test_line_from_a_newer_invocation_starts_it() -> None:
    s = feed([unit(100, inv="run-1", started=100), line(101, LOAD_BEGIN, inv="run-1")])
    s = feed([line(150, LOAD_BEGIN, inv="run-2")], s)
    assert s.invocation == "run-2"
    assert s.invocation_started == 150


# ------------------------------------------------------------------------------------------------ exits and stops


def test_unit_inactive_while_loading_is_a_clean_stop() -> None:
    """`inactive` is how systemd reports a clean end: stopped by another console, by `systemctl stop`, or an exit
    with status 0. Treating it as a crash made every restart by someone else look like a failure."""
    s = feed([*loading(), unit(130, "inactive", sub="dead", exit_status=0)])
    assert s.phase == Phase.STOPPED
    assert s.failure is None


@pytest.mark.parametrize(("active", "sub", "status"), [
    ("failed", "failed", 1),
    ("failed", "failed", None),
    ("failed", "exited", 137),
])
def test_unit_exit_while_loading_is_failed_exit(active: str, sub: str, status: int | None) -> None:
    s = feed([*loading(), unit(130, active, sub=sub, exit_status=status)])
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert s.failure.kind == FailureKind.EXIT
    assert s.failure.phase == Phase.LOADING
    assert s.failure.excerpt, "the excerpt says the process exited"


def test_unit_exit_after_unrecognised_traceback_is_exit_with_the_traceback() -> None:
    # a traceback the preset has no signature for (not fatal by itself), then the process exits
    tb = ("Traceback (most recent call last):",
          '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/configs/model_config.py", line 88, in __init__',
          "ValueError: Unsupported architecture KimiK25ForConditionalGeneration")
    s = feed([*loading(), *[line(110, x) for x in tb]])
    assert s.phase == Phase.LOADING
    s = feed([unit(111, "failed", sub="failed", exit_status=1)], s)
    assert s.failure is not None
    assert s.failure.kind == FailureKind.EXIT
    assert s.failure.excerpt[:3] == tb
    assert "status 1" in s.failure.excerpt[-1]


def test_restart_action_gives_stopped_then_the_new_run() -> None:
    # the restart protocol stops the unit (no separate "stop" action): the exit is not a failure
    s = feed([*warmup_seen(), gen(106), ActionTaken(200, "restart"), unit(203, "failed", sub="failed",
                                                                        exit_status=143)])
    assert s.phase == Phase.STOPPED
    assert s.failure is None
    s = feed([unit(210, inv="run-2", started=210)], s)
    assert s.phase == Phase.STARTING
    assert s.invocation == "run-2"


def test_stop_request_gives_stopping_then_stopped_not_failed() -> None:
    s = feed([*warmup_seen(), gen(106)])
    assert s.phase == Phase.READY
    s = feed([ActionTaken(200, "stop")], s)
    assert s.phase == Phase.STOPPING
    s = feed([unit(201, "deactivating", sub="stop-sigterm")], s)
    assert s.phase == Phase.STOPPING
    # SGLang's shutdown can print alarming text; it is not a failure of a run we asked to stop
    s = feed([line(202, "[2026-05-29 17:20:00] Received sigquit from a child process. It usually means the child "
                        "failed.")], s)
    s = feed([unit(203, "inactive", sub="dead", exit_status=0)], s)
    assert s.phase == Phase.STOPPED
    assert s.failure is None
    assert phases(s)[-2:] == [Phase.STOPPING, Phase.STOPPED]


def test_stop_request_while_loading_with_killed_exit_is_stopped() -> None:
    s = feed([*loading(), ActionTaken(110, "stop"), unit(112, "failed", sub="failed", exit_status=137)])
    assert s.phase == Phase.STOPPED
    assert s.failure is None


# ------------------------------------------------------------------------------------------------ failures


def test_fatal_line_fails_in_the_current_phase_and_collects_the_whole_traceback() -> None:
    s = feed([*loading(), line(110, LOAD_END), line(120, SCHED_EXC)])
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert s.failure.phase == Phase.LOADING
    assert s.failure.kind == FailureKind.SCHEDULER_DIED  # all we know from the first line
    for i, tb in enumerate(OOM_TRACEBACK):
        s = feed([line(120 + 0.01 * (i + 1), tb)], s)
    assert s.failure is not None
    assert s.failure.kind == FailureKind.OOM, "the traceback's last line refines the kind"
    assert s.failure.phase == Phase.LOADING
    excerpt = "\n".join(s.failure.excerpt)
    assert SCHED_EXC in excerpt
    for tb in OOM_TRACEBACK:
        assert tb in excerpt
    assert "out of memory" in s.failure.hint.lower()
    # an ordinary prefixed line afterwards closes the excerpt
    s = feed([line(130, "[2026-06-02 08:00:30] Some ordinary info line")], s)
    assert s.failure is not None
    assert "Some ordinary info line" not in "\n".join(s.failure.excerpt)
    assert s.phase == Phase.FAILED


def test_error_lines_printed_before_the_fatal_line_are_in_the_excerpt() -> None:
    # vLLM prints the traceback, then `EngineCore failed to start.`; lines from
    # tests/fixtures/logs/vllm_v010_free_memory_engine_failed.log (QinYang79/ICL#3)
    pre = [
        "(VllmWorker rank=0 pid=3926141) ERROR 08-12 01:36:10 [multiproc_executor.py:511] ValueError: Free memory on "
        "device (16.61/23.68 GiB) on startup is less than desired GPU memory utilization (0.8, 18.95 GiB).",
    ]
    s = feed([unit(100, started=100),
              line(101, "(EngineCore_DP0 pid=17374) INFO 09-28 15:47:20 [gpu_model_runner.py:2602] Starting to load "
                        "model Qwen/Qwen3-8B..."),
              *[line(102, p) for p in pre],
              line(103, "(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718] EngineCore failed to start.")],
             preset=VLLM)
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert s.failure.kind == FailureKind.OOM
    assert s.failure.phase == Phase.LOADING
    assert any("Free memory on device" in x for x in s.failure.excerpt)


def test_failure_during_graph_capture_is_cuda_graph() -> None:
    # tests/fixtures/logs/sglang_capture_failed_illegal_memory.log (0.4.4.post3)
    s = feed([*loading(), line(105, CAPTURE_BEGIN), line(140, SCHED_EXC),
              line(140, '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", '
                        "line 267, in __init__"),
              line(140, "    raise Exception("),
              line(140, "Exception: Capture cuda graph failed: RuntimeError: CUDA error: an illegal memory access "
                        "was encountered")])
    assert s.failure is not None
    assert s.failure.phase == Phase.GRAPH_CAPTURE
    assert s.failure.kind == FailureKind.CUDA_GRAPH


def test_dflash_graph_replay_crash_hint_says_disable_cuda_graph() -> None:
    events = [unit(100, started=100, argv=DFLASH_ARGV), line(101, LOAD_BEGIN), line(102, LOAD_END),
              line(103, CAPTURE_BEGIN), line(104, READY_LINE), gen(105), line(200, DECODE_LINE),
              line(255, SCHED_EXC), *[line(255, tb) for tb in REPLAY_TRACEBACK]]
    s = feed(events)
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert s.failure.kind == FailureKind.CUDA_GRAPH
    assert s.failure.phase == Phase.READY
    assert "disable-cuda-graph" in s.failure.hint
    assert "DFLASH" in s.failure.hint
    # the same crash without speculative decoding gets the generic hint: the DFLASH one comes from the argv
    plain = ("/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/root/models/Kimi-K2.6",
             "--tp-size", "8", "--ep-size", "8", "--port", "30001")
    s2 = feed([unit(100, started=100, argv=plain), *events[1:]])
    assert s2.failure is not None
    assert s2.failure.kind == FailureKind.CUDA_GRAPH
    assert "DFLASH" not in s2.failure.hint
    assert "speculative" not in s2.failure.hint
    assert s2.failure.hint != s.failure.hint


def test_flags_come_from_the_units_argv() -> None:
    s = feed([unit(100, started=100, argv=DFLASH_ARGV)])
    flags = s.flag_dict()
    assert flags["speculative-algorithm"] == "DFLASH"
    assert flags["tp-size"] == "8"


# ------------------------------------------------------------------------------------------------ stall


def test_stall_while_loading_is_reported_and_cleared_by_a_line() -> None:
    s = feed(loading(), stall_after=10.0)  # last progress at 101
    s = feed([Tick(105)], s)
    assert s.stalled_for is None
    s = feed([Tick(112)], s)
    assert s.stalled_for == pytest.approx(11.0)
    assert s.phase == Phase.LOADING, "a stall is a warning, not a phase"
    s = feed([line(113, "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.11it/s]")], s)
    assert s.stalled_for is None


def test_gpu_memory_change_counts_as_progress() -> None:
    base = feed([*loading(), MemoryObserved(101.5, 10_000.0)], stall_after=10.0)
    # memory keeps growing (weights being copied): not stalled
    s = feed([MemoryObserved(108, 40_000.0), Tick(115)], base)
    assert s.stalled_for is None
    s = feed([Tick(118.5)], s)
    assert s.stalled_for == pytest.approx(10.5)
    # memory that does not move is no progress
    s = feed([MemoryObserved(108, 10_010.0), Tick(112)], base)
    assert s.stalled_for == pytest.approx(11.0)


def test_no_stall_once_ready_or_failed() -> None:
    s = feed([*warmup_seen(), gen(106), Tick(1000)], stall_after=10.0)
    assert s.phase == Phase.READY
    assert s.stalled_for is None
    s = feed([*loading(), unit(110, "failed", sub="failed", exit_status=1), Tick(1000)], stall_after=10.0)
    assert s.stalled_for is None


# ------------------------------------------------------------------------------------------------ hypothesis

_times = st.floats(min_value=-1e10, max_value=4e9, allow_nan=False, allow_infinity=False)
_junk = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=200)
_pieces = st.sampled_from([
    LOAD_BEGIN, LOAD_END, CAPTURE_BEGIN, UVICORN_STARTED, READY_LINE, SCHED_EXC, DECODE_LINE, *OOM_TRACEBACK,
    *REPLAY_TRACEBACK, "[bold]", "[/]", "[red]oops[/red]", "\x1b[31m", "\x1b]0;title\x07", "\x1b[2J", "\r", "\n",
    "Traceback (most recent call last):", "(EngineCore_DP0 pid=1) ERROR 09-28 15:47:24 [core.py:718] ",
    "EngineCore failed to start.", "Application startup complete.", "[2026-06-02 08:00:20 TP0 EP0] ",
    "May 29 17:01:02 host python[1]: ", "svc-1  | ", "\x00", "\t",
])
_text = st.one_of(
    _junk,
    st.lists(st.one_of(_pieces, _junk), max_size=6).map("".join),
    st.builds(lambda p, n: p * n, _pieces, st.integers(min_value=1, max_value=3000)),
)
_invs = st.sampled_from(["", INV, "other", "x" * 40])
_argvs = st.one_of(st.just(()), st.just(DFLASH_ARGV),
                   st.lists(st.sampled_from(["--tp", "8", "--disable-cuda-graph", "--speculative-algorithm",
                                             "DFLASH", "--tp-size=4", "--enable-metrics", "junk", "--"]),
                            max_size=8).map(tuple))
_events = st.one_of(
    st.builds(LogLine, at=_times, text=_text, invocation=_invs),
    st.builds(lambda at, active, inv, started, status, argv, exited: UnitObserved(at, UnitState(
        active=active, invocation=inv, started_at=started, exit_status=status, argv=argv, exited_at=exited)),
        _times, st.sampled_from(["active", "activating", "deactivating", "inactive", "failed", "unknown", ""]),
        _invs, st.none() | _times, st.none() | st.integers(-300, 300), _argvs, st.none() | _times),
    st.builds(ProbeResult, at=_times, kind=st.sampled_from(["connect", "health", "models", "generate", "?"]),
              ok=st.booleans()),
    st.builds(ActionTaken, at=_times, action=st.sampled_from(["start", "stop", "restart", "dance"])),
    st.builds(Tick, at=_times),
    st.builds(MemoryObserved, at=_times, used_mib=st.floats(min_value=0, max_value=2e6, allow_nan=False)),
    st.builds(FlagsKnown, at=_times, argv=_argvs),
    st.builds(LogSourceKnown, at=_times, where=st.sampled_from(["", "journalctl -u sglang.service", "/tmp/x.log"])),
    st.builds(ProbeRequired, at=_times, required=st.booleans()),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=st.lists(_events, max_size=40), preset=st.sampled_from([SGLANG, VLLM]),
       require_probe=st.booleans(), logs_available=st.booleans())
def test_random_event_sequences_never_raise(events: list[Event | MemoryObserved], preset, require_probe: bool,
                                            logs_available: bool) -> None:
    s = initial(require_probe=require_probe, logs_available=logs_available, stall_after=30.0)
    for ev in events:
        s = reduce(s, ev, preset)
        assert isinstance(s.phase, Phase)
        assert all(isinstance(t.phase, Phase) for t in s.timeline)
        assert s.stalled_for is None or s.stalled_for >= 0
        if s.failure is not None:
            assert isinstance(s.failure.kind, FailureKind)
            assert len(s.failure.excerpt) <= MAX_EXCERPT
    s.seconds_in()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=st.lists(_events, max_size=40), preset=st.sampled_from([SGLANG, VLLM]),
       require_probe=st.booleans(), logs_available=st.booleans())
def test_reduce_lines_equals_reduce_on_random_events(events: list[Event | MemoryObserved], preset,
                                                     require_probe: bool, logs_available: bool) -> None:
    """Runs of log lines folded by `reduce_lines` (as the engine does) give the state `reduce` gives line by
    line, whatever the unit, probe and action events between them and whatever the lines say."""
    from tui.lifecycle.reducer import reduce_lines

    one = batched = initial(require_probe=require_probe, logs_available=logs_available, stall_after=30.0)
    run: list[LogLine] = []
    for ev in events:
        one = reduce(one, ev, preset)
        if isinstance(ev, LogLine):
            run.append(ev)
            continue
        batched = reduce(reduce_lines(batched, run, preset), ev, preset)
        run = []
        assert batched == one
    assert reduce_lines(batched, run, preset) == one


def _all_alternations() -> list[object]:
    out: list[object] = []
    for p in (SGLANG, VLLM):
        out += [p.ready, p.fatal, *(m.pattern for m in (*p.markers, *p.phase_hints)),
                *(c.pattern for c in p.classifiers)]
        if p.serving is not None:
            out.append(p.serving)
    return out


_WORDINGS = [a.pattern for a in _all_alternations()]  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), which=st.integers(min_value=0, max_value=len(_WORDINGS) - 1))
def test_alternation_screen_never_hides_a_match(data: st.DataObject, which: int) -> None:
    """The substring screen in front of each preset regex (`Alternation.search`) answers exactly like the regex:
    on text around a string the regex itself generates (so matches are common), and on arbitrary text."""
    alt = _all_alternations()[which]
    inner = data.draw(st.one_of(st.from_regex(alt.regex, fullmatch=True), st.text(max_size=40)))  # type: ignore[attr-defined]
    text = data.draw(st.text(max_size=10)) + inner + data.draw(st.text(max_size=10))
    assert (alt.search(text) is None) == (alt.regex.search(text) is None)  # type: ignore[attr-defined]


def test_a_run_that_ended_before_we_looked_ends_when_the_manager_says() -> None:
    """A stopped run first seen minutes later: its stop (or crash) is dated by the unit's exit time, not by the
    moment we looked, so the last phase does not seem to have lasted until now."""
    s = feed([*warmup_seen(100.0), gen(105.0)])
    assert s.phase == Phase.READY
    u = UnitState(active="inactive", sub="dead", main_pid=0, invocation=INV, started_at=100.0, exited_at=160.0)
    stopped = reduce(s, UnitObserved(400.0, u), SGLANG)
    assert stopped.phase == Phase.STOPPED and stopped.timeline[-1].at == 160.0
    crashed = reduce(s, UnitObserved(400.0, replace(u, active="failed", sub="failed", exit_status=1)), SGLANG)
    assert crashed.phase == Phase.FAILED and crashed.failure is not None and crashed.failure.at == 160.0
    # an exit time from before the last transition (clock skew, a stale record) is not believed
    odd = reduce(s, UnitObserved(400.0, replace(u, exited_at=50.0)), SGLANG)
    assert odd.timeline[-1].at == 400.0


# ------------------------------------------------------------------------------------------------ real logs' lessons

# sglang #7783 (tests/fixtures/logs/sglang_watchdog_timeout_while_serving.log): the watchdog on rank 3
WATCHDOG_TP3 = "[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)"


@pytest.mark.parametrize("text", [
    WATCHDOG_TP3,
    # the 0.5.23 wording (notes/servers.md §5)
    "[2026-06-02 08:00:20 TP0 EP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
])
def test_a_watchdog_timeout_on_any_rank_is_fatal(text: str) -> None:
    s = feed([*warmup_seen(), gen(106), line(200, DECODE_LINE), line(500, text)])
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert s.failure.kind == FailureKind.SCHEDULER_DIED and s.failure.phase == Phase.READY
    assert s.failure.excerpt[0] == text
    assert "watchdog" in s.failure.hint


def test_a_soft_watchdog_only_dumps() -> None:
    # 0.5.23's soft watchdog (`self.soft=True`) logs the same line and carries on serving
    soft = "[2026-06-02 08:00:20 TP0 EP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)"
    s = feed([*warmup_seen(), gen(106), line(500, soft)])
    assert s.phase == Phase.READY


# the sim's crash-while-serving scenario (tui/sim/server.py), in SGLang's 0.5.23 wording (notes/servers.md §5)
SUBPROCESS_CRASH = ("[2026-06-02 08:10:00] Subprocess scheduler_3 (pid=4246) crashed with exit code -9. "
                    "Triggering SIGQUIT for cleanup...")
SIGQUIT_SERVING = "[2026-06-02 08:10:00] SIGQUIT received. signum=3, frame=None. It usually means one child failed."
SIGQUIT_LAUNCH = "[2026-06-02 08:10:00] Received sigquit from a child process. It usually means the child failed."


def test_the_parents_sigquit_after_a_crash_is_not_part_of_the_excerpt() -> None:
    s = feed([*warmup_seen(), gen(106), line(300, SUBPROCESS_CRASH), line(300.1, SIGQUIT_SERVING),
              line(300.2, "[2026-06-02 08:10:00] kill_process_tree called: parent_pid=4242, include_parent=True, "
                          "pid=4242"),
              unit(301, "failed", sub="failed", exit_status=-9)])
    assert s.failure is not None
    assert s.failure.excerpt == (SUBPROCESS_CRASH,), "the crash is the cause; the SIGQUIT is what it caused"
    assert s.failure.kind == FailureKind.SCHEDULER_DIED
    # the same after a scheduler's traceback: the excerpt ends with the traceback's last line
    s = feed([*loading(), line(120, SCHED_EXC), *[line(120.1, tb) for tb in OOM_TRACEBACK], line(121, SIGQUIT_LAUNCH)])
    assert s.failure is not None
    assert s.failure.excerpt[-1] == OOM_TRACEBACK[-1]
    assert s.failure.kind == FailureKind.OOM


def test_a_sigquit_with_no_earlier_cause_is_the_failure() -> None:
    s = feed([*warmup_seen(), gen(106), line(300, SIGQUIT_SERVING)])
    assert s.phase == Phase.FAILED
    assert s.failure is not None and s.failure.excerpt == (SIGQUIT_SERVING,)


# how `python -m sglang.launch_server` ends where sglang is not installed (CPython's runpy message)
NO_MODULE = ("/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' "
             "(ModuleNotFoundError: No module named 'sglang')")


def test_an_exit_with_no_recognised_error_shows_the_last_lines_in_neutral_words() -> None:
    s = feed([unit(100, started=100), line(100.5, "some preamble the server printed"), line(101, NO_MODULE),
              unit(102, "failed", sub="exited", exit_status=1)])
    assert s.failure is not None
    assert s.failure.kind == FailureKind.EXIT
    assert s.failure.excerpt[:2] == ("some preamble the server printed", NO_MODULE)
    last = s.failure.excerpt[-1]
    assert "the server process exited with status 1" in last
    assert "unit" not in last and "failed/exited" not in last, "no systemd words: the manager may be anything"
    # where the log can be read, when the engine knows it
    s = feed([unit(100, started=100), line(101, NO_MODULE), unit(102, "failed", sub="exited", exit_status=1)],
             log_source="/var/lib/bringup/deployments/demo/logs/current.log")
    assert s.failure is not None
    assert "/var/lib/bringup/deployments/demo/logs/current.log" in s.failure.excerpt[-1]


def test_an_exit_shows_only_the_runs_last_lines() -> None:
    many = [line(101 + i * 0.01, f"[2026-06-02 08:00:{i % 60:02d}] line {i}") for i in range(200)]
    s = feed([unit(100, started=100), *many, unit(105, "failed", sub="exited", exit_status=1)])
    assert s.failure is not None
    shown = s.failure.excerpt[:-1]
    assert len(shown) == 20 and shown[-1].endswith("line 199") and shown[0].endswith("line 180")
    # a new run forgets the old run's lines
    s = feed([unit(200, started=200, inv="other"), line(201, NO_MODULE, inv="other"),
              unit(202, "failed", sub="exited", exit_status=1, inv="other")], s)
    assert s.failure is not None and s.failure.excerpt[:-1] == (NO_MODULE,)


@pytest.mark.parametrize(("status", "words"), [
    (-9, "killed by signal 9, SIGKILL"),
    (137, "exited with status 137 (killed by signal 9, SIGKILL)"),
    (None, "the server process exited;"),
])
def test_exit_words_say_how_it_ended(status: int | None, words: str) -> None:
    s = feed([*loading(), unit(130, "failed", sub="failed", exit_status=status)])
    assert s.failure is not None
    assert words in s.failure.excerpt[-1]


def test_a_recognised_block_before_the_exit_is_not_called_unrecognised() -> None:
    # PyTorch's wording when a rank cannot reach the store: NCCL by its words, fatal by none of SGLang's
    tb = ("Traceback (most recent call last):",
          "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from "
          "[0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer")
    s = feed([*loading(), *[line(110, x) for x in tb], unit(111, "failed", sub="failed", exit_status=1)])
    assert s.failure is not None and s.failure.kind == FailureKind.NCCL
    assert s.failure.excerpt[-1] == "the server process exited with status 1"


# uvicorn's access line for a generation, in SGLang's format (notes/servers.md §1; sglang #2418)
GEN_200 = '[2024-12-09 16:10:51] INFO:     10.1.1.33:46322 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def test_an_answered_generation_is_readiness_evidence_in_a_replay_only() -> None:
    s = feed([unit(100, started=100), line(101, LOAD_BEGIN), line(150, GEN_200)], require_probe=False)
    assert s.phase == Phase.READY, "a replayed log that shows generations being answered was ready"
    # live, SGLang answers its own warmup request before its ready line: readiness stays the ready line plus
    # bringup's own generation probe
    s = feed([unit(100, started=100), line(101, LOAD_BEGIN), line(150, GEN_200), gen(151)])
    assert s.phase == Phase.LOADING
    s = feed([line(152, READY_LINE), gen(153)], s)
    assert s.phase == Phase.READY and s.timeline[-1].at == 152


def test_a_refused_or_failed_request_is_not_readiness_evidence_for_sglang() -> None:
    # sglang #2468: the warmup request refused by a proxy; SGLang is not ready until its warmup succeeded
    s = feed([unit(100, started=100), line(101, LOAD_BEGIN),
              line(150, '[2024-12-13 01:45:04] INFO:     127.0.0.1:43594 - "POST /generate HTTP/1.1" 502 Bad Gateway')],
             require_probe=False)
    assert s.phase == Phase.LOADING


# vllm PR #21391 (tests/fixtures/logs/vllm_uvicorn_up_preprocess_error.log) and microsoft/graphrag#357
REQUEST_ERROR = (
    "ERROR 07-22 08:51:06 [serving_completion.py:131] Error in preprocessing prompt inputs",
    "ERROR 07-22 08:51:06 [serving_completion.py:131] Traceback (most recent call last):",
    'ERROR 07-22 08:51:06 [serving_completion.py:131]   File "/usr/local/lib/python3.12/dist-packages/vllm/'
    'entrypoints/openai/serving_completion.py", line 123, in create_completion',
    'INFO:     172.16.80.35:48532 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
    "ERROR:    Exception in ASGI application",
    "Traceback (most recent call last):",
    '  File "/home/bigdata/anaconda3/envs/vllm/lib/python3.11/site-packages/uvicorn/protocols/http/'
    'httptools_impl.py", line 411, in run_asgi',
)


def test_request_errors_after_ready_do_not_fail_the_server() -> None:
    ready = "(APIServer pid=1) INFO:     Application startup complete."
    s = feed([unit(100, started=100), line(101, ready), gen(102), *[line(110, x) for x in REQUEST_ERROR]],
             preset=VLLM)
    assert s.phase == Phase.READY and s.failure is None
    s = feed([line(110, x) for x in REQUEST_ERROR], preset=VLLM, require_probe=False)
    assert s.phase == Phase.READY, "vLLM answers HTTP only once it is ready: an answered request proves it"


def test_a_clean_shutdown_is_a_stop_even_when_the_exit_status_looks_like_a_crash() -> None:
    # SGLang's SIGTERM handler kills its own tree (sglang PR #16484: exit 137); the sim prints the same line
    s = feed([*warmup_seen(), gen(106), line(300, "[2026-06-02 08:10:00] SIGTERM received. signum=15, frame=None."),
              line(300.5, "[2026-06-02 08:10:00] kill_process_tree called: parent_pid=4242, include_parent=True, "
                          "pid=4242")])
    assert s.phase == Phase.STOPPING
    s = feed([unit(301, "failed", sub="failed", exit_status=137)], s)
    assert s.phase == Phase.STOPPED and s.failure is None


@pytest.mark.parametrize("text", [
    "[2026-06-17 13:46:57] INFO:     Shutting down",
    "INFO:     Shutting down",
    "(APIServer pid=3945527) INFO 05-26 19:19:56 [launcher.py:100] [shutdown] API server: shutdown triggered",
    "[2026-06-17 13:46:57] INFO:     Finished server process [5698]",
])
def test_shutdown_lines_mean_stopping(text: str) -> None:
    s = feed([*warmup_seen(), gen(106), line(300, text)])
    assert s.phase == Phase.STOPPING


def test_shutdown_lines_after_a_failure_keep_it_failed() -> None:
    s = feed([*loading(), line(120, SCHED_EXC), line(121, "[2026-06-17 13:46:57] INFO:     Shutting down"),
              unit(122, "failed", sub="failed", exit_status=1)])
    assert s.phase == Phase.FAILED


def test_a_replayed_log_that_starts_again_after_a_clean_shutdown_follows_the_new_run() -> None:
    # the 0.5.23 start line (notes/servers.md §2)
    s = feed([line(100, LOAD_BEGIN), line(105, READY_LINE), line(300, "INFO:     Shutting down"),
              line(400, "[2026-06-02 09:00:00] server_args=ServerArgs(model_path='/root/models/Kimi-K2.6')"),
              line(401, LOAD_BEGIN)], require_probe=False)
    assert s.phase == Phase.LOADING and phases(s) == [Phase.STARTING, Phase.LOADING]
    # live, the unit's state says when a new run starts
    s = feed([*warmup_seen(), line(300, "INFO:     Shutting down"),
              line(301, "[2026-06-02 09:00:00] server_args=ServerArgs(model_path='/root/models/Kimi-K2.6')")])
    assert s.phase == Phase.STOPPING


def test_log_ended_while_stopping_is_stopped() -> None:
    from tui.lifecycle.reducer import log_ended

    s = feed([*warmup_seen(), gen(106), line(300, "INFO:     Shutting down")])
    assert log_ended(s).phase == Phase.STOPPED
    r = feed(warmup_seen())
    assert log_ended(r) == r


# tests/fixtures/logs/vllm_compile_enginecore_failed_ci.log (pytorch #170570)
DYNAMO = "(EngineCore_DP0 pid=3112) INFO 12-15 12:35:11 [backends.py:703] Dynamo bytecode transform time: 0.88 s"
ENGINE_FAILED = "(EngineCore_DP0 pid=3112) ERROR 12-15 12:35:11 [core.py:866] EngineCore failed to start."


def test_a_vllm_failure_in_torch_compile_is_not_a_cuda_graph_failure() -> None:
    s = feed([unit(100, started=100), line(101, DYNAMO), line(102, ENGINE_FAILED)], preset=VLLM)
    assert s.failure is not None
    assert s.failure.phase == Phase.GRAPH_CAPTURE
    assert s.failure.kind == FailureKind.UNKNOWN
    # unless the traceback says capture (vLLM V1's gpu_model_runner.capture_model)
    frame = ('(EngineCore_DP0 pid=3112) ERROR 12-15 12:35:11 [core.py:866]   File "/usr/local/lib/python3.12/'
             'dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3300, in capture_model')
    s = feed([line(102.1, frame)], s, preset=VLLM)
    assert s.failure is not None and s.failure.kind == FailureKind.CUDA_GRAPH


def test_a_pasted_sglang_line_that_lost_its_bracket_still_fails_in_warmup() -> None:
    # sglang #2193's line, as pasted without its leading `[`
    s = feed([line(100, "2024-11-26 14:25:58] Initialization failed. warmup error: Traceback (most recent call "
                        "last):"),
              line(100, '  File "/home/liyuhang/miniconda3/envs/sglang/lib/python3.12/site-packages/sglang/srt/'
                        'server.py", line 579, in _wait_and_warmup')], require_probe=False)
    assert s.phase == Phase.FAILED
    assert s.failure is not None
    assert (s.failure.kind, s.failure.phase) == (FailureKind.WARMUP, Phase.WARMUP)


# ------------------------------------------------------------------------------------------------ settings are events


def test_memory_observed_is_one_of_the_models_events() -> None:
    from tui import model

    assert MemoryObserved is model.MemoryObserved  # the reducer's name is a re-export


def test_flags_known_before_an_ended_runs_log_give_its_failure_the_live_hint() -> None:
    """The engine reads an ended run's argv before replaying its log: the failure's hint is the one the live console
    gave (DFLASH + CUDA graphs), though no unit event carried the argv yet."""
    crash = [line(101, LOAD_BEGIN), line(103, CAPTURE_BEGIN), line(104, READY_LINE), line(255, SCHED_EXC),
             *[line(255, tb) for tb in REPLAY_TRACEBACK]]
    s = feed([FlagsKnown(100, DFLASH_ARGV), *crash], require_probe=False)
    assert s.flag_dict()["speculative-algorithm"] == "DFLASH"
    assert s.failure is not None and "DFLASH" in s.failure.hint
    assert "DFLASH" not in feed(crash, require_probe=False).failure.hint  # type: ignore[union-attr]


def test_log_source_known_names_where_to_read_an_unexplained_exit() -> None:
    s = feed([LogSourceKnown(99, "journalctl -u sglang.service"), *loading(),
              unit(130, "failed", sub="failed", exit_status=1)])
    assert s.log_source == "journalctl -u sglang.service"
    assert s.failure is not None and s.failure.excerpt[-1].endswith("of journalctl -u sglang.service")


def test_probe_required_off_while_an_ended_runs_log_is_read_back() -> None:
    """With the probe not required (an ended run's log, read back), its own ready line is the evidence; required
    again afterwards, a new run's ready line waits for a generation."""
    s = feed([ProbeRequired(99, False), *warmup_seen()])
    assert s.phase == Phase.READY and not s.require_probe
    s = feed([ProbeRequired(106, True), unit(200, inv="next", started=200),
              line(205, READY_LINE, inv="next")], s)
    assert s.require_probe and s.phase == Phase.WARMUP


def test_settings_change_nothing_but_themselves() -> None:
    s = feed(warmup_seen())
    for ev in (FlagsKnown(106, DFLASH_ARGV), LogSourceKnown(106, "x.log"), ProbeRequired(106, False)):
        after = reduce(s, ev, SGLANG)
        assert (after.phase, after.timeline, after.failure, after.readiness, after.blocks) == \
            (s.phase, s.timeline, s.failure, s.readiness, s.blocks)


def test_a_sigkilled_servers_excerpt_is_its_own_words_and_the_hint_says_who_kills() -> None:
    """Killed while serving: the last lines are mostly requests answered (bringup's own /metrics scrapes and
    probes among them), which say nothing of why; the excerpt keeps the server's own lines, and the hint names
    what sends SIGKILL, since no server logs it."""
    from tui.lifecycle.failures import SIGKILL_HINT
    own = [line(110 + i, f"[2026-06-02 08:01:{i:02d}] Decode batch. #running-req: 2, #token: {900 + i}")
           for i in range(5)]
    access = [line(120 + i * 0.1, f'[2026-06-02 08:02:{i % 60:02d}] INFO:     127.0.0.1:5{i:04d} - "GET /metrics '
                   'HTTP/1.1" 200 OK') for i in range(30)]
    s = feed([*loading(), line(109, READY_LINE), gen(109.5), *own, *access,
              unit(130, "failed", sub="failed", exit_status=-9)])
    assert s.failure is not None and s.failure.kind == FailureKind.EXIT
    shown = s.failure.excerpt[:-1]
    assert not any("HTTP/1.1" in ln for ln in shown) and shown[-1].endswith("#token: 904"), shown
    assert "killed by signal 9, SIGKILL" in s.failure.excerpt[-1] and s.failure.hint == SIGKILL_HINT
    # a line that arrives after the exit (the journal is late) keeps the hint the exit gave
    s = feed([line(130.5, '[2026-06-02 08:03:00] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK')], s)
    assert s.failure is not None and s.failure.hint == SIGKILL_HINT
