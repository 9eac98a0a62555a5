"""Where the console's engines are built: the one module of the console that names the concrete engine and fleet
(tui/engine/). The rest of the console drives them through tui/console/port.py's Protocols, and `lint-imports`
holds it to that."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tui.config.settings import Settings
from tui.console.port import ConsoleEngine, ConsoleFleet
from tui.engine import Engine
from tui.engine.fleet import Fleet


def open_engine(settings: Settings, name: str) -> ConsoleEngine:
    """The engine of one configured deployment, not started."""
    return Engine(settings, name, settings.deployments[name])


def open_fleet(settings: Settings, names: Sequence[str]) -> ConsoleFleet:
    """The engines of `names`, one transport and one GPU stream per host, not started."""
    return Fleet(settings, names)


async def prepare_demo(w: ConsoleEngine, say: Callable[[str], None]) -> bool:
    """The built-in demo's server, started if it does not run as configured (tui/ops/demo.py `prepare`): True when
    this call started it, so the console stops it on exit."""
    from tui.ops.demo import prepare

    assert isinstance(w, Engine), "the demo runs on an engine this module built"
    return await prepare(w, say)
