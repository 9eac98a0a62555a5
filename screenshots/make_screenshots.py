"""Screenshots of the console on the live simulated deployment, at each moment the README shows.

    python screenshots/make_screenshots.py            # writes screenshots/*.svg (and *.png with cairosvg)

Everything shown is real: the simulated SGLang server runs as a process, bringup watches it through the same
engine as a real deployment, and the keys pressed are those a user presses. Takes about a minute.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.helpers.simdeploy import settings_for  # noqa: E402
from tui.console.control import ControlConsoleApp  # noqa: E402
from tui.model import Phase  # noqa: E402

SIZE = (120, 34)


def save(app: ControlConsoleApp, name: str) -> None:
    svg = HERE / f"{name}.svg"
    app.save_screenshot(str(svg))
    try:
        import cairosvg

        cairosvg.svg2png(url=str(svg), write_to=str(HERE / f"{name}.png"), output_width=1600)
    except ImportError:
        pass
    print("wrote", svg.name)


async def wait_for(pilot, cond, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the simulated deployment did not get there in time")
        await pilot.pause(0.1)


async def bring_up(tmp: Path) -> None:
    app = ControlConsoleApp(settings_for(tmp, time_scale=0.5), "sim")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.engine is not None and app.engine.state.unit is not None)
        await pilot.press("s", "y")
        phase = lambda: app.engine.state.phase  # noqa: E731
        await wait_for(pilot, lambda: phase() == Phase.LOADING)
        await pilot.pause(4)
        save(app, "loading")
        await wait_for(pilot, lambda: phase() == Phase.GRAPH_CAPTURE)
        await pilot.pause(2)
        save(app, "graph-capture")
        await wait_for(pilot, lambda: phase() == Phase.READY)
        await pilot.pause(12)
        await pilot.press("e")
        save(app, "ready")
        inv = app.engine.state.invocation
        await pilot.press("f")
        await pilot.pause(0.5)
        await pilot.press("space")
        save(app, "flags")
        await pilot.press("a")
        await pilot.pause(0.5)
        save(app, "confirm")
        await pilot.press("y")
        await wait_for(pilot, lambda: any(s.name == "release" and s.status == "running" for s in app.shown.steps))
        await pilot.pause(0.3)
        save(app, "mid-restart")
        await wait_for(pilot, lambda: app.engine.state.invocation != inv and phase() == Phase.READY)
        w = app.engine
        w.action("stop")
        await w.manager.stop()
        await w.close()
        app.engine = None


async def dflash_crash(tmp: Path, size: tuple[int, int] = SIZE, name: str = "failed-dflash") -> None:
    app = ControlConsoleApp(settings_for(tmp, time_scale=0.3, scenario="dflash-graph-crash"), "sim")
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.engine is not None and app.engine.state.unit is not None)
        await pilot.press("s", "y")
        await wait_for(pilot, lambda: app.engine.state.phase == Phase.FAILED)
        await pilot.pause(2)
        save(app, name)
        w = app.engine
        await w.close()
        app.engine = None


async def second_start(tmp: Path) -> None:
    """The ETA: the first start records the deployment's history, the second is told how long it has left."""
    app = ControlConsoleApp(settings_for(tmp, time_scale=0.5), "sim")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.engine is not None and app.engine.state.unit is not None)
        phase = lambda: app.engine.state.phase  # noqa: E731
        await pilot.press("s", "y")
        await wait_for(pilot, lambda: phase() == Phase.READY)
        await pilot.press("s", "y")  # stop
        await wait_for(pilot, lambda: phase() == Phase.STOPPED)
        await pilot.pause(1)
        await pilot.press("s", "y")  # the second start
        await wait_for(pilot, lambda: phase() == Phase.LOADING)
        await pilot.pause(3)
        save(app, "eta")
        w = app.engine
        w.action("stop")
        await w.manager.stop()
        await w.close()
        app.engine = None


def main() -> None:
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    only = sys.argv[1:]  # names of the moments to take again (`second_start`), else all of them
    with tempfile.TemporaryDirectory() as d:
        if only:
            for name in only:
                asyncio.run(globals()[name](Path(d) / name))
            return
        asyncio.run(bring_up(Path(d) / "up"))
        asyncio.run(second_start(Path(d) / "eta"))
        asyncio.run(dflash_crash(Path(d) / "dflash"))
        asyncio.run(dflash_crash(Path(d) / "dflash-small", (80, 24), "failed-dflash-80x24"))  # the smallest terminal


if __name__ == "__main__":
    main()
