"""The one mark of an error that waiting will not fix, shared by every layer that raises one.

A transport (an unknown host key, authentication refused), a manager (no such unit, sudo refused) and a lock (its
file cannot be opened) each have their own error types; what the layers above need to know of all of them is the
same: stop retrying, say the message and exit 2. So each permanent kind derives from `PermanentError` as well as
from its own layer's error, and callers ask `isinstance(e, PermanentError)`.
"""

from __future__ import annotations


class PermanentError(Exception):
    """Waiting and retrying will not fix it: `bringup wait` and every retry loop stop at once and show the message,
    and a command exits 2 (as for a refusal: nothing was done)."""
