"""plotext's Textual widget, let go of when it is removed.

`PlotextPlot` subscribes to the app's theme signal when mounted and never unsubscribes. The signal keeps its
subscribers in a table keyed weakly by widget, but the callback it keeps for each is a closure over that widget: the
key never dies, so every plot ever mounted stays alive with its figure (0.26 MiB for the sweep view's two charts,
every time the view was built). Unsubscribed here, through Textual's public `Signal.unsubscribe`, when it goes.
"""

from __future__ import annotations

from textual_plotext import PlotextPlot


class Plot(PlotextPlot):
    def on_unmount(self) -> None:
        self.app.theme_changed_signal.unsubscribe(self)
