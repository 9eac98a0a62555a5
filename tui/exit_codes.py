"""Every exit status `bringup` returns, the headless commands' and the console's alike.

Scripts branch on these numbers (`bringup wait k26 --timeout 1800 && run-benchmarks`), so they are a public
interface: a value never changes meaning. A leaf module, importing nothing of bringup, so that the CLI, the console
and the demo can all use it without an import cycle.
"""

from __future__ import annotations

import enum
import signal

__all__ = ["ExitCode", "signalled"]


class ExitCode(enum.IntEnum):
    #: ready, done, or nothing to do
    OK = 0
    #: the server failed, the action failed, or the host could not be reached (worth trying again)
    FAILED = 1
    #: wrong input, a config error, a refusal (nothing was done) or a permanent error (unknown host key, unit not
    #: found): trying again as it is will not help
    USAGE = 2
    #: not ready within the timeout: told apart from a failure, since the run may still become ready. Also the
    #: release wait's end: the old run's GPU memory not shown released within release_timeout_s, whether readings
    #: showed it still held or there were no readings at all (no evidence of release: the start is refused, and a
    #: stop is not called done, unless a grace accepts the risk: `--unverified-release-grace`)
    TIMEOUT = 3
    #: `wait`: nothing is starting, so waiting longer would not help
    STOPPED = 4
    #: the result is not this command's: another run replaced the one it started, or its lock was lost and things
    #: changed meanwhile (a sweep must not file it under this config)
    SUPERSEDED = 5
    #: the console's terminal went away
    HANGUP = 128 + signal.SIGHUP
    #: Ctrl-C
    INTERRUPTED = 128 + signal.SIGINT
    #: the reader of stdout went away (`bringup status | head`): as a shell reports a process killed by SIGPIPE
    BROKEN_PIPE = 128 + signal.SIGPIPE
    #: `kill <pid>`: ended as Ctrl-C ends it, with what it started stopped
    TERMINATED = 128 + signal.SIGTERM


def signalled(signum: int) -> int:
    """The status for ending on a signal, as a shell reports it (128 + N)."""
    return 128 + signum
