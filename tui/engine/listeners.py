"""Who hears an engine (engine/core.py), and when: its typed updates (updates.py) to every listener as they happen,
a wake-up for whoever waits on a change (`wait_changed`: the protocols), and, for a front end that draws by the clock
(the console), the whole picture every second (`PictureTaken`) while it asks for it and is looking.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from tui.model import Snapshot

from .grid import sleep_on_grid
from .updates import PictureTaken, Update


class Listeners:
    """An engine's listeners. `picture`: the engine's whole picture now; `looking`: whether a front end can see it
    (not paused, not in a fleet's background)."""

    def __init__(self, picture: Callable[[], Snapshot], looking: Callable[[], bool]) -> None:
        self._picture = picture
        self._looking = looking
        self._fns: list[Callable[[Update], None]] = []
        self._changed = asyncio.Event()
        #: a front end that draws by the clock (the console) is told the whole picture every second while it shows
        #: this engine (`pictures`); no other listener asks for it
        self._pictures = False
        self._picture_task: asyncio.Task[None] | None = None

    def subscribe(self, fn: Callable[[Update], None]) -> None:
        self._fns.append(fn)

    def unsubscribe(self, fn: Callable[[Update], None]) -> None:
        with contextlib.suppress(ValueError):
            self._fns.remove(fn)

    def emit(self, update: Update) -> None:
        self._changed.set()
        for fn in list(self._fns):
            fn(update)

    async def wait_changed(self, timeout: float) -> None:
        """Until the next update (a picture is news of no change: it wakes no one), or `timeout`."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()

    @property
    def pictures(self) -> bool:
        return self._pictures

    @pictures.setter
    def pictures(self, on: bool) -> None:
        """Asked for, the pictures begin at the next second of the grid, whether the collectors run or not (a
        console opened on what an engine has read so far is told it too); no longer asked for, they end there."""
        self._pictures = on
        if on and self._picture_task is None:
            with contextlib.suppress(RuntimeError):  # no loop running: nothing can listen yet, nor be drawn
                self._picture_task = asyncio.get_running_loop().create_task(self._picture_loop(),
                                                                            name="bringup-picture")

    async def _picture_loop(self) -> None:
        """The whole picture, on the one-second grid the periodic readings share (no wake-up of its own), while a
        front end asks for it and is looking."""
        try:
            while self._pictures:
                await sleep_on_grid(1.0)
                if self._pictures and self._looking() and self._fns:
                    picture = PictureTaken(self._picture())
                    for fn in list(self._fns):  # news of no change: `wait_changed` is not woken by it
                        fn(picture)
        finally:
            self._picture_task = None

    def close(self) -> None:
        """Nothing is told after this: a console switching deployments must not get the old one's last lines."""
        self._fns.clear()
        self._pictures = False
        if self._picture_task is not None:
            self._picture_task.cancel()
