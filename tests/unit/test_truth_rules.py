"""What the console and `wait` say must be what the evidence shows, as the engine's rules have it: a generation sent
before the ready line is no evidence, a run that came and went between readings ends as the manager says, a run that
died before the first look takes its excerpt from its log, an old run's probe is not the new run's, log lines reach
the reducer at once and listeners in batches. The same against real processes: tests/e2e/test_truth.py."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from tests.helpers.reducer_events import feed, warmup_seen
from tui.config.settings import load
from tui.engine import Engine
from tui.lifecycle.reducer import LifecycleState
from tui.model import Phase, ProbeResult, UnitObserved, UnitState


def _died_at_import(s: LifecycleState, at: float) -> tuple[LifecycleState, str]:
    """The last lines of a server that died at import, read from `at` on, after its exit: the run still failed,
    and its excerpt (returned) names the cause."""
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.reducer import reduce
    from tui.model import LogLine

    p = get_preset("sglang")
    for i, text in enumerate(("Traceback (most recent call last):", '  File "<string>", line 1, in <module>',
                              "ModuleNotFoundError: No module named 'sglang_is_not_installed_here'")):
        s = reduce(s, LogLine(at + i / 100, text, "r1"), p)
    assert s.phase == Phase.FAILED and s.failure is not None
    excerpt = "\n".join(s.failure.excerpt)
    assert "ModuleNotFoundError: No module named 'sglang_is_not_installed_here'" in excerpt, excerpt
    return s, excerpt


def test_a_generation_sent_before_the_ready_line_and_answered_after_it_is_not_evidence() -> None:
    """The old process (seed 001) answers a request sent while the new run was still warming up: the answer
    arrives after the new run's ready line, but was not made by it."""
    s = feed(warmup_seen())  # ready line at t=105
    assert s.phase == Phase.WARMUP
    late = ProbeResult(at=106.0, kind="generate", ok=True, status=200, latency_s=2.5)  # sent at 103.5
    s = feed([late], s)
    assert s.phase == Phase.WARMUP
    s = feed([ProbeResult(at=106.5, kind="generate", ok=True, status=200, latency_s=0.4)], s)  # sent at 106.1
    assert s.phase == Phase.READY


async def test_the_old_runs_probe_is_not_shown_for_a_new_run(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path}"\n[hosts.h]\ngpu_source = "none"\n[deployments.d]\nhost = "h"\n'
                   'manager = "none"\nendpoint = "http://127.0.0.1:9"\n')
    settings = load(str(cfg))
    w = Engine(settings, "d", settings.deployments["d"])
    try:
        w.feed(UnitObserved(100.0, UnitState(active="active", sub="running", main_pid=1, invocation="old",
                                             started_at=50.0)))
        w.feed(ProbeResult(at=101.0, kind="health", ok=True, status=200, latency_s=0.01))
        assert w.snapshot(102.0).endpoint == "/health ok"
        w.feed(UnitObserved(103.0, UnitState(active="active", sub="running", main_pid=2, invocation="new",
                                             started_at=102.5)))
        w.feed(ProbeResult(at=103.1, kind="health", ok=True, status=200, latency_s=0.9))  # sent at 102.2
        assert w.snapshot(104.0).endpoint == ""  # the new run has not been probed yet
        w.feed(ProbeResult(at=104.0, kind="connect", ok=False, detail="connection refused", latency_s=0.01))
        assert w.snapshot(104.5).endpoint == "connect: refused"
    finally:
        await w.close()


def test_a_run_that_came_and_went_between_two_readings_ends_as_the_manager_says() -> None:
    """The new run was killed before it was ever seen running: it failed (the unit says so); it must not read as
    the previous run's clean stop."""
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.reducer import initial, reduce

    p = get_preset("sglang")
    s = initial()
    for ev in (UnitObserved(100, UnitState("active", "running", 1, "old", started_at=100)),
               UnitObserved(110, UnitState("inactive", "dead", 0, "old", exit_status=0)),
               UnitObserved(120, UnitState("failed", "failed", 0, "new", exit_status=-9, started_at=119))):
        s = reduce(s, ev, p)
    assert s.phase == Phase.FAILED and s.invocation == "new" and s.failure is not None
    assert "killed by signal 9" in "\n".join(s.failure.excerpt)


def test_a_run_that_died_before_the_first_look_takes_its_excerpt_from_its_log_read_back() -> None:
    """The order the loaded CI machine gave the test above: the exit is read first, the log after. The failure
    first says where to read; once the run's lines are read back they are its excerpt, as when the log came first."""
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.reducer import initial, reduce

    p = get_preset("sglang")
    s = reduce(initial(log_source="/state/d/logs/r1.log"),
               UnitObserved(100, UnitState("failed", "exited", 0, "r1", exit_status=1, started_at=99)), p)
    assert s.phase == Phase.FAILED and s.failure is not None
    assert s.failure.excerpt[-1].endswith("read the last lines of /state/d/logs/r1.log"), s.failure.excerpt
    s, excerpt = _died_at_import(s, 99.1)
    assert "before bringup first looked" in excerpt and "the lines above are the last" in excerpt, excerpt
    assert s.timeline[-1].phase == Phase.FAILED and [t.phase for t in s.timeline].count(Phase.FAILED) == 1


def test_a_run_seen_running_whose_exit_was_read_before_its_last_lines_takes_them_as_its_excerpt() -> None:
    """The other order a loaded machine gives (CI): the run was seen starting, its exit was read before the log's
    reader had its last lines, and none of them is a fatal line that would name the cause. Those lines, once read,
    are the excerpt, as when the log came first; not only where to read them."""
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.reducer import initial, reduce

    p = get_preset("sglang")
    s = reduce(initial(log_source="/state/d/logs/r1.log"),
               UnitObserved(99.5, UnitState("active", "running", 42, "r1", started_at=99)), p)
    s = reduce(s, UnitObserved(100, UnitState("failed", "exited", 0, "r1", exit_status=1, started_at=99)), p)
    assert s.phase == Phase.FAILED and s.failure is not None
    assert s.failure.excerpt[-1].endswith("read the last lines of /state/d/logs/r1.log"), s.failure.excerpt
    s, excerpt = _died_at_import(s, 99.6)
    assert "the lines above are the last of /state/d/logs/r1.log" in excerpt, excerpt
    assert "before bringup first looked" not in excerpt, excerpt
    assert [t.phase for t in s.timeline].count(Phase.FAILED) == 1


async def test_log_lines_reach_the_reducer_at_once_and_listeners_in_batches_and_a_quiet_log_costs_no_timer() -> None:
    """One buffer: a burst is applied 250 lines at a time with the loop let in between (keys and the screen keep
    up), and sent to listeners as one batch, in order, each line once; nothing is scheduled while no line comes."""
    from tui.engine.logs import APPLY_CHUNK, SEND_AFTER_S, LogFollower
    from tui.lifecycle.lines import LineKind
    from tui.model import LogLine

    burst = [LogLine(at=1.0, text=f"line {i}", invocation="run1") for i in range(600)]
    release = asyncio.Event()

    class Manager:
        async def follow(self, unit: UnitState):  # type: ignore[no-untyped-def]
            for line in burst:
                yield line
            await release.wait()

    applied: list[int] = []
    sent: list[tuple[LogLine, ...]] = []
    sent_kinds: list[tuple[LineKind, ...]] = []

    def apply(lines: list[LogLine]) -> list[LineKind]:  # the reducer gives back each line's kind
        applied.append(len(lines))
        return [LineKind.ERROR if ln.text.endswith("7") else LineKind.PLAIN for ln in lines]

    def send(lines: tuple[LogLine, ...], kinds: tuple[LineKind, ...]) -> None:
        sent.append(lines)
        sent_kinds.append(kinds)

    f = LogFollower(Manager(), apply, send)  # type: ignore[arg-type]
    unit = UnitState(active="active", invocation="run1")
    task = asyncio.create_task(f.run(lambda: unit, asyncio.Event()))
    try:
        await asyncio.sleep(0.02)
        assert sum(applied) == len(burst) and max(applied) <= APPLY_CHUNK and len(applied) >= 3, applied
        assert sent == []  # the reducer has them all; listeners get them a moment later, together
        await asyncio.sleep(SEND_AFTER_S + 0.05)
        assert [ln for batch in sent for ln in batch] == burst and len(sent) == 1
        assert [k for batch in sent_kinds for k in batch] == [
            LineKind.ERROR if ln.text.endswith("7") else LineKind.PLAIN for ln in burst]  # each with its line's
        assert f._send_at is None and f._lines == []  # quiet: nothing pending, no timer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_a_run_first_seen_on_its_way_out_is_the_current_run_and_its_exit_a_failure() -> None:
    """A process that dies at once can be first read while its supervisor is still writing down how (the process
    manager's `deactivating`): that reading was taken for a stop of no run at all, the phase stayed on no
    invocation, and `bringup start` waited on it until its timeout (found under load in CI)."""
    from tui.lifecycle.presets import get_preset
    from tui.lifecycle.reducer import initial, reduce

    p = get_preset("sglang")
    s = initial()
    for ev in (UnitObserved(100, UnitState("inactive", "dead")),
               UnitObserved(101, UnitState("deactivating", "stop", 0, "new", started_at=100.5)),
               UnitObserved(102, UnitState("failed", "exited", 0, "new", exit_status=1, started_at=100.5,
                                           exited_at=100.6))):
        s = reduce(s, ev, p)
    assert s.invocation == "new" and s.phase == Phase.FAILED and s.failure is not None
    # a fresh observer of a stop in progress sees it stopping, and its clean end stopped
    s3 = initial()
    for ev in (UnitObserved(200, UnitState("deactivating", "stop-sigterm", 9, "x", started_at=150)),
               UnitObserved(201, UnitState("inactive", "dead", 0, "x", exit_status=0, started_at=150))):
        s3 = reduce(s3, ev, p)
        assert s3.phase in (Phase.STOPPING, Phase.STOPPED) and s3.invocation == "x"
    assert s3.phase == Phase.STOPPED and s3.failure is None
    # a stop of the run being watched is still a stop
    s2 = reduce(reduce(s, UnitObserved(103, UnitState("active", "running", 7, "next", started_at=103)), p),
                UnitObserved(104, UnitState("deactivating", "stop-sigterm", 7, "next", started_at=103)), p)
    assert s2.phase == Phase.STOPPING and s2.invocation == "next"
