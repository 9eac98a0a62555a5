"""The release wait's rule for a host without GPU readings, on an engine of the shape restart drives
(`tui/ops/engine_view.py`), and the exit codes and options it comes with: no readings is no release.

The end-to-end cases (a real restart, stop and start against the simulated server, a real missing nvidia-smi) are in
tests/e2e/test_release_evidence.py; these pin the rule's parts that take timing to see there: once per distinct reason,
the grace counted from the old run's processes gone (never from before), readings that come back mid-wait, and a
host that declares no GPU telemetry polled not at all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from tui.cli.args import UsageError, build_parser
from tui.config.deployments import ProcessDeployment
from tui.config.parts import HostConfig
from tui.exit_codes import ExitCode
from tui.model import GpuSample, GpuSnapshot, Outcome, Phase, Result, Step, UnitState
from tui.ops.errors import ReleaseUnverified
from tui.ops.outcome import exit_code
from tui.ops.release_wait import wait_for_release


class _Settings:
    def __init__(self, host: HostConfig) -> None:
        self.hosts = {"h": host}

    def host(self, name: str) -> HostConfig:
        return self.hosts[name]


class FakeEngine:
    """The GPU side of an engine: `readings` answers each fresh query; `gone_after` says when the old run's
    processes are gone (seconds from the start), as the manager's unit reading would."""

    def __init__(self, readings: Callable[[int], GpuSnapshot | None], *, gpu_source: str = "nvidia-smi",
                 grace: float | None = None, gone_after: float = 0.0) -> None:
        self.dep = ProcessDeployment(host="h", manager="process", command=["server"], gpus=[0],
                                     unverified_release_grace_s=grace)
        self.settings = _Settings(HostConfig(gpu_source=gpu_source))  # type: ignore[arg-type]
        self.readings = readings
        self.polls = 0
        self.t0 = time.monotonic()
        self.gone_after = gone_after
        self.gpus: GpuSnapshot | None = None
        self.baseline_mib: dict[int, float] = {0: 0.0}
        self.previous_pids: set[int] = set()
        self.observed: list[GpuSnapshot] = []

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]:
        return [0]

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None:
        self.polls += 1
        return self.readings(self.polls)

    def observe_gpus(self, snap: GpuSnapshot) -> None:
        self.observed.append(snap)

    async def poll_unit(self) -> UnitState:
        gone = time.monotonic() - self.t0 >= self.gone_after
        return UnitState(active="inactive" if gone else "deactivating", invocation="old")


def _failing(*reasons: str) -> Callable[[int], GpuSnapshot]:
    """Each poll fails, with the reasons in turn (the last one from then on)."""
    return lambda n: GpuSnapshot(at=time.time(), error=reasons[min(n, len(reasons)) - 1])


def _released(n: int) -> GpuSnapshot:
    return GpuSnapshot(at=time.time(), gpus=(GpuSample(index=0, mem_used_mib=0.0),))


async def test_no_readings_is_waited_on_up_to_the_timeout_then_refused_saying_each_reason_once() -> None:
    eng = FakeEngine(_failing("nvidia-smi: cannot run 'x'", "nvidia-smi: cannot run 'x'", "nvidia-smi: timed out",
                              "nvidia-smi: cannot run 'x'"))
    steps: list[Step] = []
    t0 = time.monotonic()
    with pytest.raises(ReleaseUnverified) as e:
        await wait_for_release(eng, {123}, steps.append, timeout=2.0)  # type: ignore[arg-type]
    assert time.monotonic() - t0 >= 2.0
    waiting = [s.detail for s in steps if s.status == "running"]
    assert len(waiting) == 2, waiting
    assert "cannot run 'x'" in waiting[0] and "timed out" in waiting[1], waiting
    assert steps[-1].status == "failed" and "NOT verified" in steps[-1].detail, steps
    msg = str(e.value)
    assert "\n" not in msg and "no GPU readings from h in 2 s" in msg and "the new run was NOT started" in msg, msg
    assert "--unverified-release-grace" in msg, msg


async def test_the_grace_counts_from_the_old_runs_processes_gone_and_says_the_release_was_not_verified() -> None:
    eng = FakeEngine(_failing("no such file"), grace=0.4, gone_after=0.6)
    steps: list[Step] = []
    t0 = time.monotonic()
    snap = await wait_for_release(eng, {123}, steps.append, timeout=30.0)  # type: ignore[arg-type]
    took = time.monotonic() - t0
    assert snap is None
    assert took >= 1.0, took  # 0.6 s until gone, then the whole 0.4 s grace
    assert took < 5.0, took
    assert steps[-1].status == "skipped", steps
    assert "NOT verified" in steps[-1].detail and "unverified_release_grace_s" in steps[-1].detail, steps


async def test_without_the_old_runs_processes_gone_the_grace_does_not_start_it() -> None:
    eng = FakeEngine(_failing("no such file"), grace=0.0, gone_after=3600.0)
    steps: list[Step] = []
    with pytest.raises(ReleaseUnverified) as e:
        await wait_for_release(eng, {123}, steps.append, timeout=0.8, purpose="stop")  # type: ignore[arg-type]
    assert "processes are not gone" in str(e.value) and "a start now could hit a CUDA OOM" in str(e.value)


async def test_readings_that_come_during_the_wait_are_the_evidence() -> None:
    eng = FakeEngine(lambda n: _failing("nvidia-smi: not permitted")(n) if n < 3 else _released(n))
    steps: list[Step] = []
    snap = await wait_for_release(eng, {123}, steps.append, timeout=30.0)  # type: ignore[arg-type]
    assert snap is not None and snap.gpus
    assert steps[-1].status == "done" and "released" in steps[-1].detail, steps
    assert eng.observed == [snap]


async def test_a_host_that_declares_no_gpu_telemetry_is_not_waited_on() -> None:
    eng = FakeEngine(lambda n: None, gpu_source="none")
    steps: list[Step] = []
    snap = await asyncio.wait_for(wait_for_release(eng, {123}, steps.append, timeout=30.0),  # type: ignore[arg-type]
                                  5.0)
    assert snap is None and eng.polls == 0
    assert [s.status for s in steps] == ["skipped"] and 'gpu_source = "none"' in steps[0].detail, steps


def test_refused_after_the_wait_is_exit_3_a_refusal_at_once_stays_2() -> None:
    assert exit_code(Outcome(Result.UNVERIFIED, Phase.STOPPED, "x")) == ExitCode.TIMEOUT == 3
    assert exit_code(Outcome(Result.REFUSED, Phase.STOPPED, "x")) == ExitCode.USAGE
    assert exit_code(Outcome(Result.TIMED_OUT, Phase.STOPPED, "x")) == ExitCode.TIMEOUT
    assert exit_code(Outcome(Result.FAILED, Phase.FAILED, "x")) == ExitCode.FAILED


@pytest.mark.parametrize("command", ["restart", "start", "stop"])
def test_the_grace_option_names_the_risk_and_takes_zero_but_not_a_negative(command: str,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    p = build_parser()
    assert p.parse_args([command, "d", "--unverified-release-grace", "0"]).unverified_release_grace == 0.0
    assert p.parse_args([command, "d"]).unverified_release_grace is None
    with pytest.raises(UsageError):
        p.parse_args([command, "d", "--unverified-release-grace", "-1"])
    with pytest.raises(SystemExit):
        p.parse_args([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--unverified-release-grace SECONDS" in help_text and "RISKING A CUDA OOM" in help_text, help_text
