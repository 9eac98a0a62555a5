"""The way back an incident record offers: only a command `bringup restart` accepts, or why there is none.

The record used to build it from every option of the two command lines (`options()`), so a failed demo run offered
`--unset scenario`, a flag of the simulator that `restart` refused ("unknown flag 'scenario'", with a suggested
`kind = "bool"` wrong for a flag with a value) -- issue 51. Here the flags are read with the preset's specs, as
`restart` reads them: `--set` only of the run's release's flags (`offered`), `--unset` of any flag bringup knows,
every value checked by its spec, the command line's other arguments equal; anything else is said as a comment,
never offered as a command. Pure: the record is built from the history alone.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from tui.lifecycle.flags import apply_changes, current_values, parse_changes, remove_flag
from tui.lifecycle.presets import FlagSpec, FlagValueError
from tui.lifecycle.secrets import REDACTED, is_secret_flag


def _others(argv: Sequence[str], specs: Sequence[FlagSpec]) -> list[str]:
    rest = list(argv)
    for spec in specs:
        rest = remove_flag(rest, spec)
    return rest


def way_back(deployment: str, failed: Sequence[str], ready: Sequence[str], specs: Sequence[FlagSpec],
             offered: Sequence[FlagSpec]) -> list[str]:
    """The lines of the record's "going back": `bringup restart ...` (one command `restart` accepts), or a `# `
    comment saying why none can be given; [] when the flags are the ready run's already. `specs`: every flag
    bringup reads; `offered`: those `--set` takes for the run's release."""
    now, then = current_values(failed, specs), current_values(ready, specs)
    unsets = [flag for flag in now if flag not in then]
    sets = [flag if value is None else f"{flag}={value}" for flag, value in then.items()
            if flag not in now or now[flag] != value]
    if _others(failed, specs) != _others(ready, specs):
        return ["# the ready run's command line differs in arguments that are not flags bringup changes (the "
                "model, the port, a server option it does not know): restore it in the config by hand"]
    if not (sets or unsets):
        return []
    offered_names = {n for f in offered for n in (f.name, *f.aliases)}
    if any(item.partition("=")[0] not in offered_names for item in sets):
        return ["# the ready run's flags include one this release does not offer: restore them by hand"]
    if any(is_secret_flag(item.partition("=")[0]) or REDACTED in item for item in sets):
        return ["# a secret's value differs, which is never recorded: set it again by hand"]
    try:
        if current_values(apply_changes(failed, parse_changes(sets, unsets, specs), specs), specs) != then:
            return ["# --set/--unset cannot say the ready run's flags exactly: restore them by hand"]
    except FlagValueError as e:
        return [f"# --set/--unset cannot say the ready run's flags: {e}"]
    words = [w for flag in unsets for w in ("--unset", flag)] + [w for item in sets for w in ("--set", item)]
    return [shlex.join(["bringup", "restart", deployment, *words])]
