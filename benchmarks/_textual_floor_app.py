"""The floor under a Textual console like bringup's: the same layout (a header, four bordered panels in a grid,
one of them a log) where, once a second, one row of the GPU panel and one row of the throughput panel change, and
nothing else happens: no I/O, no parsing, no engine, no log line.

    python benchmarks/_textual_floor_app.py

That is less than a ready bringup console redraws each second (its GPU rows with their sparklines, the throughput
figures and sparkline, the chart every few seconds, and log lines as they come), so what this costs is a lower
bound: what Textual itself takes to keep such a screen live. Each changing row is its own one-row Static, updated
without a layout pass, as bringup updates its own. console_vs_nvitop.py runs it next to bringup and nvitop, in the
same windows.
"""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Header, Log, Static

CSS = """
Grid { grid-size: 2 2; }
.panel { border: round $primary; height: 1fr; }
.panel Static { height: 1; }
"""
PANELS = ("lifecycle", "gpus", "throughput")
LIVE = ("gpus", "throughput")


class FloorApp(App[None]):
    CSS = CSS

    def compose(self) -> ComposeResult:
        yield Header()
        with Grid():
            for name in PANELS:
                with Vertical(classes="panel"):
                    yield Static(f"{name}: live row", id=f"{name}-live")
                    for i in range(8):
                        yield Static(f"{name}: a row that does not change ({i})")
            yield Log(id="log", classes="panel")

    def on_mount(self) -> None:
        self.n = 0
        self.query_one("#log", Log).write_lines(f"log line {i} that does not change" for i in range(40))
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        self.n += 1
        now = time.strftime("%H:%M:%S")
        for name in LIVE:
            self.query_one(f"#{name}-live", Static).update(f"{name} {now} {self.n}", layout=False)


if __name__ == "__main__":
    FloorApp().run()
