"""The exit status of a restart's, start's or stop's `Result`: a table, so that every result has exactly one status
and adding a result without one fails the table's test instead of falling through an if-chain.

The table lives here, not in model.py or exit_codes.py: those two are siblings of the base layer and import each
other not at all; the protocols' layer sees both.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tui.exit_codes import ExitCode
from tui.model import Outcome, Result

__all__ = ["RESTART_EXIT", "STOP_EXIT", "exit_code", "stop_exit_code"]

#: `start` and `restart`. Refused after a wait (UNVERIFIED: no GPU readings showed the old run's memory released
#: within release_timeout_s, so nothing was started) is a timeout, 3, like memory read and still held: told apart
#: from a refusal at once (2, nothing done), since fixing the readings, or waiting, may let it through.
RESTART_EXIT: Mapping[Result, ExitCode] = MappingProxyType({
    Result.DONE: ExitCode.OK,
    Result.FAILED: ExitCode.FAILED,
    Result.ROLLED_BACK: ExitCode.FAILED,
    Result.LOCK_HELD: ExitCode.USAGE,
    Result.REFUSED: ExitCode.USAGE,
    Result.UNVERIFIED: ExitCode.TIMEOUT,
    Result.TIMED_OUT: ExitCode.TIMEOUT,
    Result.SUPERSEDED: ExitCode.SUPERSEDED,
})

#: `stop`: as a restart, except that a stop not done in time failed: there is no "ready" to go on waiting for. One
#: that stopped but had no GPU readings to show the memory free (UNVERIFIED) is 3, as a restart's is.
STOP_EXIT: Mapping[Result, ExitCode] = MappingProxyType({**RESTART_EXIT, Result.TIMED_OUT: ExitCode.FAILED})


def exit_code(outcome: Outcome) -> ExitCode:
    """The exit status of a start's or restart's outcome."""
    return RESTART_EXIT[outcome.result]


def stop_exit_code(outcome: Outcome) -> ExitCode:
    return STOP_EXIT[outcome.result]
