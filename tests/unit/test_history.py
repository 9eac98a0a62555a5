"""The run history (tui/lifecycle/history.py) and its file (tui/engine/history.py): one record per run whatever
the writers, bounded, secrets never stored, and the way back from a failed run's flags to a ready run's."""

from __future__ import annotations

import multiprocessing
import shlex
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.engine.history import HistoryStore
from tui.lifecycle.history import MAX_RUNS, Observed, flags_diff, going_back, options, record_of, upsert
from tui.lifecycle.run_record import RunEnd, RunRecord, Span, from_dict, to_dict
from tui.model import Failure, FailureKind, Phase, Transition

T0 = 1_800_000_000.0
ARGV = ("python3", "-m", "sglang.launch_server", "--model-path", "/m/k26", "--tp-size", "8", "--enable-metrics")


def observed(inv: str, at: float, phases: list[tuple[Phase, float]], *, argv: tuple[str, ...] = ARGV,
             failure: Failure | None = None, now: float | None = None) -> Observed:
    tl = tuple(Transition(p, at + dt) for p, dt in phases)
    return Observed(deployment="k26", invocation=inv, started_at=at, argv=argv, timeline=tl, phase=tl[-1].phase,
                    now=now if now is not None else tl[-1].at, failure=failure, host="gpu-box")


def run(inv: str, start: float, *, n_phases: int = 5, ended: bool = True) -> RunRecord:
    phases = [(Phase.STARTING, 0.0), (Phase.LOADING, 5.0), (Phase.GRAPH_CAPTURE, 60.0), (Phase.WARMUP, 80.0),
              (Phase.READY, 90.0)][:n_phases]
    if not ended:
        phases = phases[:min(len(phases), 4)]
    return record_of(observed(inv, start, phases), None)


# ---------------------------------------------------------------- records


def test_a_record_has_the_timeline_with_durations_the_outcome_and_the_diff_against_the_run_before() -> None:
    first = record_of(observed("a", T0, [(Phase.STARTING, 0), (Phase.LOADING, 4), (Phase.READY, 70)]), None)
    assert first.outcome == RunEnd.READY and first.ready_after_s == 70
    assert [(s.phase, s.seconds) for s in first.timeline] == [(Phase.STARTING, 4), (Phase.LOADING, 66),
                                                              (Phase.READY, 0.0)]
    assert first.flags_diff == ()
    second = record_of(observed("b", T0 + 100, [(Phase.STARTING, 0), (Phase.LOADING, 4)],
                                argv=(*ARGV, "--disable-cuda-graph"), now=T0 + 110), first)
    assert second.outcome == RunEnd.UNDER_WAY and second.timeline[-1].seconds == 6
    assert second.flags_diff == ("+ --disable-cuda-graph",)
    assert second.argv_hash != first.argv_hash


def test_a_run_stopped_once_ready_reached_ready_and_a_failed_one_keeps_its_failure() -> None:
    r = record_of(observed("a", T0, [(Phase.STARTING, 0), (Phase.READY, 30), (Phase.STOPPING, 900),
                                     (Phase.STOPPED, 905)]), None)
    assert r.outcome == RunEnd.READY and r.ready_after_s == 30
    f = Failure(Phase.WARMUP, FailureKind.CUDA_GRAPH, ("Traceback", "illegal memory access"), "hint", T0 + 40)
    r = record_of(observed("b", T0, [(Phase.STARTING, 0), (Phase.WARMUP, 30), (Phase.FAILED, 40)], failure=f), None)
    assert r.outcome == RunEnd.FAILED and r.failure is not None and r.failure.kind == "cuda-graph"
    assert not r.reached_ready


def test_secrets_never_reach_the_record_but_a_new_key_is_another_command_line() -> None:
    argv = (*ARGV, "--api-key", "sk-live-123", "HF_TOKEN=hf_abc")
    f = Failure(Phase.LOADING, FailureKind.UNKNOWN, ("api_key='sk-live-123' refused",), "check --api-key", T0)
    r = record_of(observed("a", T0, [(Phase.STARTING, 0), (Phase.FAILED, 3)], argv=argv, failure=f), None)
    text = repr(to_dict(r))
    assert "sk-live-123" not in text and "hf_abc" not in text, text
    other = record_of(observed("b", T0, [(Phase.STARTING, 0)], argv=(*ARGV, "--api-key", "sk-other")), None)
    assert other.argv_hash != r.argv_hash


def test_options_reads_any_option_switches_values_and_equals() -> None:
    assert options(["python3", "-m", "x", "--a", "1", "--b", "--c=2", "--d"]) == {"a": "1", "b": None, "c": "2",
                                                                                  "d": None}


flag_sets = st.dictionaries(st.sampled_from(["tp-size", "disable-cuda-graph", "speculative-algorithm", "mem-fraction"]),
                            st.one_of(st.none(), st.sampled_from(["8", "DFLASH", "0.9", "a b"])), max_size=4)


@given(failed=flag_sets, ready=flag_sets)
def test_going_back_puts_the_ready_runs_flags_back(failed: dict[str, str | None], ready: dict[str, str | None]) -> None:
    """The command's --set/--unset, applied to the failed run's flags, give the ready run's exactly."""
    cmd = going_back("k26", failed, ready)
    if failed == ready:
        assert cmd == ""
        return
    words = shlex.split(cmd)
    assert words[:3] == ["bringup", "restart", "k26"]
    flags = dict(failed)
    for verb, arg in zip(words[3::2], words[4::2], strict=True):
        if verb == "--unset":
            flags.pop(arg)
        else:
            name, eq, value = arg.partition("=")
            flags[name] = value if eq else None
    assert flags == ready
    assert (flags_diff(failed, ready) == ()) is (failed == ready)


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0, 1000), st.integers(1, 5), st.booleans()),
                max_size=40), st.integers(1, 6))
@settings(max_examples=200)
def test_upsert_keeps_one_record_per_run_in_order_and_bounded(writes: list[tuple[str, float, int, bool]],
                                                              keep: int) -> None:
    runs: list[RunRecord] = []
    started: dict[str, float] = {}
    for inv, start, n, ended in writes:
        start = started.setdefault(inv, start)  # a run starts once
        runs = upsert(runs, run(inv, T0 + start, n_phases=n, ended=ended), keep=keep)
        assert len({r.invocation for r in runs}) == len(runs) <= keep
        assert [r.started_at for r in runs] == sorted(r.started_at for r in runs)


def test_a_late_watchers_view_never_unmakes_the_ready_another_saw() -> None:
    """A restart's engine reads the old run back and stops it before its first probe: it never sees it ready."""
    ready = run("a", T0)
    late = record_of(observed("a", T0, [(Phase.STARTING, 0), (Phase.LOADING, 5), (Phase.GRAPH_CAPTURE, 60),
                                        (Phase.WARMUP, 80), (Phase.STOPPING, 300), (Phase.STOPPED, 302)]), None)
    assert late.outcome == RunEnd.STOPPED
    for first, second in ((ready, late), (late, ready)):
        (merged,) = upsert(upsert([], first), second)
        assert merged.outcome == RunEnd.READY and merged.ready_after_s == 90


def test_a_watcher_that_saw_only_the_end_keeps_the_command_line_and_the_whole_traceback() -> None:
    """`bringup stop` after a failure reads the ended run back: no command line, maybe less of the excerpt."""
    phases = [(Phase.STARTING, 0), (Phase.WARMUP, 30), (Phase.FAILED, 40)]
    whole = Failure(Phase.WARMUP, FailureKind.CUDA_GRAPH, ("Traceback", "frame", "illegal memory access"), "h", T0)
    live = record_of(observed("a", T0, phases, argv=(*ARGV, "--x"), failure=whole),
                     run("before", T0 - 500))
    late = record_of(observed("a", T0, phases, argv=(), failure=replace(whole, excerpt=("Traceback",))), None)
    for first, second in ((live, late), (late, live)):
        (merged, _) = sorted(upsert(upsert([run("before", T0 - 500)], first), second), key=lambda r: -r.started_at)
        assert merged.argv == live.argv and merged.flags_diff == ("+ --x",)
        assert merged.failure is not None and len(merged.failure.excerpt) == 3


def test_the_fuller_view_of_a_run_wins_whichever_writer_came_last() -> None:
    under_way = run("a", T0, n_phases=3, ended=False)
    ready = run("a", T0)
    for first, second in ((under_way, ready), (ready, under_way)):
        (merged,) = upsert(upsert([], first), second)
        assert merged.outcome == RunEnd.READY and len(merged.timeline) == 5


@given(st.integers(1, 5), st.booleans())
def test_a_record_reads_back_as_written(n: int, failed: bool) -> None:
    f = Failure(Phase.LOADING, FailureKind.OOM, ("CUDA out of memory",), "lower --mem-fraction", T0) if failed else None
    phases = [(Phase.STARTING, 0.0), (Phase.LOADING, 2.0), (Phase.GRAPH_CAPTURE, 9.0), (Phase.WARMUP, 12.0),
              (Phase.READY, 13.0)][:n]
    if failed:
        phases.append((Phase.FAILED, 20.0))
    r = record_of(observed("x", T0, phases, failure=f), None)
    assert from_dict(to_dict(r)) == r


# ---------------------------------------------------------------- the file


def test_the_store_bounds_the_file_and_survives_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "deployments" / "k26" / "history.json"
    store = HistoryStore(path)
    for i in range(MAX_RUNS + 7):
        store.put(lambda _runs, i=i: run(f"inv{i:03d}", T0 + i * 100))
    runs = HistoryStore(path).runs()  # another bringup, later
    assert len(runs) == MAX_RUNS and runs[-1].invocation == f"inv{MAX_RUNS + 6:03d}"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".history.")]  # no temporary file left


def test_an_unreadable_file_is_no_history_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text("{not json")
    assert HistoryStore(path).runs() == []
    path.write_text('{"format": 1, "runs": [{"invocation": "x"}, 5]}')
    assert HistoryStore(path).runs() == []


def _writer(path: str, who: int, n: int) -> None:
    store = HistoryStore(Path(path))
    for i in range(n):
        # every writer also writes the shared runs (a console and an exporter watching the same run)
        store.put(lambda _runs, i=i: run(f"w{who}-{i}", T0 + who * 1000 + i))
        store.put(lambda _runs, i=i: run(f"shared-{i}", T0 + 5000 + i, n_phases=2 + who % 4))


def test_concurrent_writers_lose_and_duplicate_no_record(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 6)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    invs = [r.invocation for r in HistoryStore(path).runs()]
    assert len(invs) == len(set(invs))
    assert set(invs) == {f"w{w}-{i}" for w in range(4) for i in range(6)} | {f"shared-{i}" for i in range(6)}
    assert all(len(r.timeline) == 5 for r in HistoryStore(path).runs() if r.invocation.startswith("shared"))


def test_span_seconds_are_never_negative() -> None:
    r = record_of(observed("a", T0, [(Phase.STARTING, 0), (Phase.LOADING, 5)], now=T0 + 1), None)
    assert all(isinstance(s, Span) and s.seconds >= 0 for s in r.timeline)
