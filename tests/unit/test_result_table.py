"""A restart's, start's or stop's `Result` and its exit status: every result has one, and each way the protocol
ended before `Result` (a bag of five booleans) keeps its exit status."""

from __future__ import annotations

import json

import pytest

from tui.exit_codes import ExitCode
from tui.model import Outcome, Phase, Result, Step, StepStatus
from tui.ops.outcome import RESTART_EXIT, STOP_EXIT, exit_code, stop_exit_code


def outcome(result: Result) -> Outcome:
    return Outcome(result, Phase.STOPPED, "x")


def test_every_result_has_an_exit_status_for_a_restart_and_for_a_stop() -> None:
    assert set(RESTART_EXIT) == set(Result) == set(STOP_EXIT)


# (ok, refused, timed_out, superseded, rolled_back) as the protocol combined them, the result each now is, and the
# exit status the CLI gave each: restart's (exit_code) and stop's (timed out alone: 1)
BEFORE: list[tuple[tuple[bool, bool, bool, bool, bool], Result, ExitCode, ExitCode]] = [
    ((True, False, False, False, False), Result.DONE, ExitCode.OK, ExitCode.OK),
    ((False, False, False, False, False), Result.FAILED, ExitCode.FAILED, ExitCode.FAILED),
    ((False, False, False, False, True), Result.ROLLED_BACK, ExitCode.FAILED, ExitCode.FAILED),
    ((False, True, False, False, False), Result.LOCK_HELD, ExitCode.USAGE, ExitCode.USAGE),
    ((False, True, False, False, False), Result.REFUSED, ExitCode.USAGE, ExitCode.USAGE),
    ((False, True, True, False, False), Result.UNVERIFIED, ExitCode.TIMEOUT, ExitCode.TIMEOUT),
    ((False, False, True, False, False), Result.TIMED_OUT, ExitCode.TIMEOUT, ExitCode.FAILED),
    ((False, False, False, True, False), Result.SUPERSEDED, ExitCode.SUPERSEDED, ExitCode.SUPERSEDED),
]


def old_exit_code(ok: bool, refused: bool, timed_out: bool, superseded: bool) -> ExitCode:
    """cli/actions.py's exit_code before the table, kept here as the reference the table must agree with."""
    if ok:
        return ExitCode.OK
    if superseded:
        return ExitCode.SUPERSEDED
    if timed_out:
        return ExitCode.TIMEOUT
    return ExitCode.USAGE if refused else ExitCode.FAILED


def old_stop_exit_code(ok: bool, refused: bool, timed_out: bool, superseded: bool) -> ExitCode:
    return ExitCode.FAILED if timed_out and not refused else old_exit_code(ok, refused, timed_out, superseded)


@pytest.mark.parametrize(("flags", "result", "restart", "stop"), BEFORE, ids=[str(b[1]) for b in BEFORE])
def test_each_combination_the_protocol_produced_keeps_its_exit_status(
        flags: tuple[bool, bool, bool, bool, bool], result: Result, restart: ExitCode, stop: ExitCode) -> None:
    ok, refused, timed_out, superseded, _ = flags
    assert exit_code(outcome(result)) == restart == old_exit_code(ok, refused, timed_out, superseded)
    assert stop_exit_code(outcome(result)) == stop == old_stop_exit_code(ok, refused, timed_out, superseded)
    assert outcome(result).ok is ok


def test_the_combinations_cover_every_result() -> None:
    assert {b[1] for b in BEFORE} == set(Result)


def test_a_step_status_prints_as_the_word_it_always_was() -> None:
    step = Step("lock", StepStatus.DONE, "lock taken")
    assert json.dumps({"status": step.status}) == '{"status": "done"}'
    assert [str(s) for s in StepStatus] == ["running", "done", "failed", "skipped"]
    assert Step("lock", "failed").status is StepStatus.FAILED  # type: ignore[arg-type]  # read back from a record
    with pytest.raises(ValueError):
        Step("lock", "fine")  # type: ignore[arg-type]


def test_took_lock_is_the_lock_step_done() -> None:
    assert Outcome(Result.FAILED, Phase.FAILED, "x", steps=(Step("lock", StepStatus.DONE),)).took_lock
    assert not Outcome(Result.LOCK_HELD, Phase.READY, "x", steps=(Step("lock", StepStatus.FAILED),)).took_lock
