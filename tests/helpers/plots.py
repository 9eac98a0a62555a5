"""What a chart was given to draw, read from its plot calls: `record_plots` wraps textual-plotext's public `Plot`
methods (a chart's every drawing starts with `clear_data`), so that a test sees the data sets, the y range and the y
ticks of a chart's last drawing without reading plotext's private figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import pytest
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot


@dataclass
class Drawing:
    """A chart's data sets (one per `plot` call), and its y range and ticks: as plotext's figure has them, one list
    entry per call."""
    x: list[list[float]] = field(default_factory=list)
    y: list[list[float]] = field(default_factory=list)
    ylim: list[tuple[float, float]] = field(default_factory=list)
    yticks: list[list[float]] = field(default_factory=list)


_DRAWN: WeakKeyDictionary[Plot, Drawing] = WeakKeyDictionary()


def record_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, every chart's last drawing is recorded (read with `drawn`)."""
    def wrap(name: str, record: Any) -> None:
        real = getattr(Plot, name)

        def call(self: Plot, *args: Any, **kw: Any) -> Any:
            record(self, *args)
            return real(self, *args, **kw)

        monkeypatch.setattr(Plot, name, call)

    def clear(plot: Plot, *_: Any) -> None:
        _DRAWN[plot] = Drawing()

    def plot(plot: Plot, *args: Any) -> None:
        xs, ys = (args[0], args[1]) if len(args) >= 2 else (list(range(1, len(args[0]) + 1)), args[0])
        d = _DRAWN.setdefault(plot, Drawing())
        d.x.append([float(v) for v in xs])
        d.y.append([float(v) for v in ys])

    wrap("clear_data", clear)
    wrap("plot", plot)
    wrap("ylim", lambda plot, lo=None, hi=None, *_: _DRAWN.setdefault(plot, Drawing()).ylim.append((lo, hi)))
    wrap("yticks", lambda plot, ticks=(), *_: _DRAWN.setdefault(plot, Drawing()).yticks.append(list(ticks)))


def drawn(widget: PlotextPlot) -> Drawing:
    """What `widget`'s chart was last given to draw (record_plots must be in place)."""
    return _DRAWN.get(widget.plt, Drawing())
