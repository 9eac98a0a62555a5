"""Which deployments a console may show: all configured ones, or only those it was started on with `--only` (what
every console `bringup serve DEP...` runs: a browser session of it shows the deployments served, not the config).

Restricted by construction: the console's settings hold the named deployments only, so its picker, its overview,
the GPU panel's names of other deployments' memory and anything added later see no other; and the app opens a
deployment through one door (`ConsoleApp.open_watch`), which refuses a name its settings do not hold.
"""

from __future__ import annotations

from collections.abc import Sequence

from tui.config.settings import Settings


def only(settings: Settings, names: Sequence[str]) -> Settings:
    """`settings` holding the deployments `names` only (each a configured one: `Settings.deployment` resolved it),
    in their order; hosts and every other setting as they are."""
    kept = {n: settings.deployments[n] for n in dict.fromkeys(names)}
    return settings.model_copy(update={"deployments": kept})


def outside(name: str, shown: Sequence[str]) -> str:
    """What the console says when asked for a deployment it does not show."""
    return f"{name!r} is not shown from this console: it shows {', '.join(shown) or 'none'} only"
