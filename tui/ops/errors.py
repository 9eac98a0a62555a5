"""How a restart or stop ends short of its goal, as exceptions the transaction turns into an `Outcome`: each is
a different exit (a timeout, a lost lock, another run in ours' place), so each says a different thing to do."""

from __future__ import annotations


class RestartError(Exception):
    """A step did not finish in time (GPU memory not released, no new run, not ready): the message says what was
    waited for and what it left."""


class LockLost(RestartError):
    """The lock went (a dropped SSH connection frees it) and it could not be proven that nothing changed since."""


class Superseded(RestartError):
    """Another run than the one this restart started took the deployment over."""


class ReleaseUnverified(RestartError):
    """The host gave no GPU readings for the whole release wait, and no grace was accepted
    (`unverified_release_grace_s`, `--unverified-release-grace`): no readings is no evidence that the old run's
    memory was released, so nothing is started (a stop is not called done). A refusal after a wait: exit 3, and a
    sweep does not go on to its next configuration."""


class HeldByOthers(RestartError):
    """Another deployment or another user holds so much of the deployment's GPU memory that its start does not fit
    beside it: refused at once (exit 2), not waited for, since stopping this deployment frees none of it."""
