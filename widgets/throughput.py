"""Throughput: tokens/s now, a chart of the last minutes, requests, TTFT, and the accept length when speculative
decoding is on. Says "no metrics" plainly when the server gives none.

One figure, one smoothing: the headline is a 5-second mean of the samples, and it is the chart's last point (the
chart plots the same means). The chart costs plotext 10-40 ms a frame, so it is redrawn every few seconds, not at
every sample; the headline is updated with it, and the request counts under it with every sample. Time keeps
moving on the chart's x-axis (seconds before now) when samples stop, and the headline then says since when there
are none. A panel too short for a chart (fewer than CHART_MIN_ROWS rows left) shows the figures and a sparkline
only; with no sample yet, it says so in one line (`has_data`, and the `-no-data` class, let the layout make it
small).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from tui.model import ThroughputSample
from tui.words import duration
from widgets.cells import TextLines
from widgets.gpus import spark

#: the headline and the chart are means over this many seconds of samples (one a second from /metrics)
SMOOTH_S = 5.0
#: a newest sample older than this: the server stopped reporting (a restart, a hang); the headline says since when
STALE_S = 10.0
#: the chart is shown only with this many rows for it (a frame, an axis and at least three rows of line)
CHART_MIN_ROWS = 6
#: the chart's spans (seconds before now), the shortest that holds the samples; older samples are not drawn
SPANS = (30, 60, 120, 300)
#: the most y-axis ticks (0, 50, ..., 250)
Y_TICKS = 6
#: while the samples are stale the panel redraws itself this often, so the chart's "now" keeps moving
STALE_REDRAW_S = 5.0
#: the chart is redrawn at most this many times per span it shows (a 5-minute chart every 30 s, a 30-second one every
#: 3 s at most, every PLOT_EVERY_S of the console's at least): each redraw writes all its rows to the terminal, and on
#: an H200 host under load the chart's redraws were most of what the console wrote there
REDRAWS_PER_SPAN = 10
#: a TTFT older than this is shown with its age
TTFT_AGE_S = 5.0


def downsample(points: Sequence[tuple[float, float]], n: int) -> list[tuple[float, float]]:
    """At most `n` points: consecutive samples averaged in groups, the newest kept as it is (it is the headline
    figure). A braille chart draws two points per column; plotting more costs plotext time in proportion (300
    points took 14 ms to build, 112 took 8) and shows nothing more."""
    if n <= 0 or len(points) <= n:
        return list(points)
    if n == 1:
        return [points[-1]]
    out = []
    body = points[:-1]
    size = len(body) / (n - 1)
    for k in range(n - 1):
        group = body[int(k * size): int((k + 1) * size)]  # size > 1: never empty
        out.append((group[-1][0], sum(v for _, v in group) / len(group)))
    out.append(points[-1])
    return out


def smooth(points: Sequence[tuple[float, float]], window: float = SMOOTH_S) -> list[tuple[float, float]]:
    """Each sample replaced by the mean of the samples of the last `window` seconds up to it (itself included).
    A window never reaches across a gap longer than itself, so runs either side of a restart stay apart."""
    out: list[tuple[float, float]] = []
    lo, total = 0, 0.0
    for i, (at, v) in enumerate(points):
        total += v
        while points[lo][0] <= at - window:
            total -= points[lo][1]
            lo += 1
        out.append((at, total / (i - lo + 1)))
    return out


#: samples further apart than this are not joined by the chart's line: the server was down or not serving between
#: them (a restart), and a line across the gap would draw throughput nobody had
GAP_S = 10.0


def segments(points: Sequence[tuple[float, float]], gap: float = GAP_S) -> list[list[tuple[float, float]]]:
    """The runs of samples with no gap longer than `gap` seconds inside them."""
    out: list[list[tuple[float, float]]] = []
    for p in points:
        if not out or p[0] - out[-1][-1][0] > gap:
            out.append([])
        out[-1].append(p)
    return out


def interval(points: Sequence[tuple[float, float]]) -> float:
    """The usual time between samples (the median of the last ten): a second from /metrics, several from a log."""
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points[-11:]))
    return gaps[len(gaps) // 2] if gaps else 1.0


def stale_after(points: Sequence[tuple[float, float]]) -> float:
    """Seconds without a sample after which the samples have stopped: STALE_S, or three usual intervals."""
    return max(STALE_S, 3 * interval(points))


def nice_ticks(top: float, most: int) -> list[float]:
    """Round ticks from 0 to at least `top`, at most `most` of them (0, 50, 100, 150; 0, 2.5, 5): steps of 1, 2,
    2.5 or 5 times a power of ten, the one whose last tick is the closest above `top` (the line fills the chart)."""
    top = top if top > 0 and math.isfinite(top) else 1.0
    most = max(2, most)
    power = 10.0 ** math.floor(math.log10(top / (most - 1)))
    best: list[float] = []
    for mult in (1, 2, 2.5, 5, 10, 20, 25, 50, 100):
        step = mult * power
        n = math.ceil(top / step - 1e-9)
        if n + 1 <= most and (not best or n * step < best[-1]):
            best = [k * step for k in range(n + 1)]
    return best


def tick_label(v: float) -> str:
    if v >= 10_000 and v % 1000 == 0:
        return f"{v / 1000:g}k"
    return f"{v:g}" if v == int(v) or v < 1 else f"{v:.1f}"


def span_for(age: float) -> int:
    """The chart's span for samples reaching back `age` seconds."""
    return next((s for s in SPANS if age <= s), SPANS[-1])


def x_ticks(span: int) -> tuple[list[float], list[str]]:
    """Ticks every sixth to fifth of the span, labelled `-2m`, `-90s`, ..., `now`."""
    step = {30: 10, 60: 15, 120: 30, 300: 60}.get(span, span // 5)
    ticks = [float(-k) for k in range(span, -1, -step)]
    return ticks, [("now" if t == 0 else f"-{-t / 60:g}m" if -t % 60 == 0 else f"-{-t:g}s") for t in ticks]


def chart_series(history: Sequence[tuple[float, float]], now: float, span: int,
                 budget: int) -> list[list[tuple[float, float]]]:
    """What the chart draws: the smoothed samples of the last `span` seconds, in runs split at gaps, at seconds
    relative to `now`, `budget` points in all at most."""
    out = []
    total = len(history)
    for seg in segments(history, max(GAP_S, 3 * interval(history))):
        shown = [(at - now, v) for at, v in smooth(seg) if at >= now - span]
        if shown:
            out.append(downsample(shown, max(2, budget * len(seg) // max(1, total))))
    return out


def headline_value(tp: ThroughputSample | None, history: Sequence[tuple[float, float]]) -> float | None:
    """The figure shown: the mean of the last SMOOTH_S seconds of samples (the chart's last point)."""
    if history:
        last = history[-1][0]
        window = []
        for at, v in reversed(history):
            if at <= last - SMOOTH_S:
                break
            window.append(v)
        return sum(window) / len(window)
    return tp.tokens_per_s if tp is not None else None


def clock_time(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _age(seconds: float) -> str:
    return duration(seconds, spoken=True)


class ThroughputPanel(Vertical):
    DEFAULT_CLASSES = "panel"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: the console's clock (snapshot tests pin it), and whether the panel may redraw itself now (not while the
        #: console is paused): the console sets both
        self.clock: Callable[[], float] = time.time
        self.live: Callable[[], bool] = lambda: True
        self._args: tuple[ThroughputSample | None, Sequence[tuple[float, float]], str, bool] = (None, (), "", True)
        #: the headline figure drawn with the chart: shown until the chart is redrawn, so the two agree
        self._charted: float | None = None
        self._drawn_at = -math.inf  # when the last chart was drawn, on the panel's clock (`now`)
        self._ttft: tuple[float, float] | None = None  # the last TTFT seen, and when
        self._chart_shown = False
        #: the dots the chart showed last (`_picture`): a chart whose dots would not move is not drawn again
        self._picture: tuple[object, ...] = ()

    def compose(self) -> ComposeResult:
        yield TextLines(id="tps-now")
        # the chart is mounted with the first samples: plotext is 30-70 ms of imports the first frame need not wait for

    def on_mount(self) -> None:
        self.set_class(True, "-no-data")

    @property
    def has_data(self) -> bool:
        """Any throughput figure to show: without, the panel is one line and the layout may make it small."""
        tp, history, _, _ = self._args
        return bool(history) or (tp is not None and tp.tokens_per_s is not None)

    def age(self) -> None:
        """A second has passed (the console's tick: one timer for all its panels, each a wake-up of its own).
        Samples stopped (a restart, a stopped server): no new sample redraws the panel, so it redraws itself: the
        ages, and the chart (its x-axis is seconds before now) every STALE_REDRAW_S."""
        tp, history, _, _ = self._args
        if not self.has_data or not self.live():
            return
        now = self.clock()
        newest = history[-1][0] if history else tp.at if tp is not None else now
        ttft_aging = self._ttft is not None and tp is not None and tp.ttft_s is None
        if now - newest > stale_after(history):
            self._redraw(now, plot=now - self._drawn_at >= STALE_REDRAW_S)
        elif ttft_aging:
            self._redraw(now, plot=False)

    def on_resize(self) -> None:
        """The chart's ticks and whether it fits at all depend on the size."""
        if self.is_mounted:
            self._drawn_at = -math.inf  # a new size: drawn now, whatever the pace
            self._redraw(self.clock(), plot=True)

    def show(self, tp: ThroughputSample | None, history: Sequence[tuple[float, float]], note: str = "",
             plot: bool = True, now: float | None = None, serving: bool = True) -> None:
        """`history` is (time, tokens/s); `plot`: the chart may be redrawn now (it is anyway when it has not been
        drawn yet). When the server is not serving (stopped, failed, starting again) the last figures are
        labelled as such and its request counts are not shown as if current."""
        if tp is None and not history:
            self._ttft = None  # another deployment, or a new console: nothing of the last one's
            self._charted = None
        elif tp is not None and tp.ttft_s is not None:
            self._ttft = (tp.ttft_s, tp.at)
        self._args = (tp, history, note, serving)
        self.set_class(not self.has_data, "-no-data")
        self._redraw(now if now is not None else self.clock(), plot)

    def text_for(self, now: float, value: float | None, sparkline: bool) -> Text:
        """The figures above the chart (or in place of it)."""
        tp, history, note, serving = self._args
        t = Text()
        newest = history[-1][0] if history else tp.at if tp is not None else None
        if value is None:
            if not note:  # else the note says why there is none
                t.append("no throughput samples yet", style="dim")
        else:
            t.append(f"{value:,.1f} tok/s", style="bold")
            source = {"metrics": ", from /metrics", "log": ", from its log"}.get(tp.source, "") if tp else ""
            t.append(f"  {SMOOTH_S:g} s mean{source}", style="dim")
            if not serving:
                t.append(", the last while it served", style="dim")
            if newest is not None and now - newest > stale_after(history):
                t.append(f"\nno samples since {clock_time(newest)}", style="yellow" if serving else "dim")
            elif sparkline and history:
                width = max(8, self.content_region.width)
                values = [v for _, v in smooth(history[-(width + 20):])][-width:]
                t.append("\n" + spark(values, width), style="cyan")
        if tp is not None and serving:
            counts = []
            if tp.running is not None:
                counts.append(f"running {tp.running}  queued {tp.queued if tp.queued is not None else '-'}")
            if self._ttft is not None:
                ttft, at = self._ttft
                age = now - at
                counts.append(f"TTFT {ttft * 1000:.0f} ms" + (f", {_age(age)} ago" if age > TTFT_AGE_S else ""))
            if counts:
                t.append("\n" + "  ".join(counts))
            if tp.accept_len is not None:
                t.append(f"\naccept length {tp.accept_len:.2f}", style="bold cyan")
                if tp.accept_rate is not None:
                    t.append(f"  rate {tp.accept_rate:.2f}", style="cyan")
        if note:
            t.append(("\n" if t else "") + note, style="yellow")
        return t

    def _rows(self, t: Text) -> int:
        width = max(1, self.content_region.width)
        return sum(max(1, math.ceil(cell_len(line) / width)) for line in t.plain.split("\n"))

    def _redraw(self, now: float, plot: bool) -> None:
        tp, history, _, _ = self._args
        span = span_for(now - history[0][0]) if history else SPANS[0]
        if plot and now - self._drawn_at < span / REDRAWS_PER_SPAN:
            plot = False  # drawn a moment ago, at this span's scale: its line has not moved a column's worth
        drawable = bool(history) and history[-1][0] >= now - span
        # the figures as they will be with the chart, to see how many rows the chart is left
        probe = self.text_for(now, headline_value(tp, history), sparkline=False)
        room = self.content_region.height - self._rows(probe)
        chart = drawable and room >= CHART_MIN_ROWS
        redraw = chart and (plot or not self._chart_shown or self._charted is None)
        if not chart:
            value = headline_value(tp, history)
            self._charted = None
        elif redraw:
            value = self._charted = headline_value(tp, history)
        else:
            value = self._charted
        text = self.text_for(now, value, sparkline=not chart and room >= 1)
        self.query_one("#tps-now", TextLines).update(text)
        found = self.query("#tps-plot")
        if found and found.first().display != chart:  # set even to its value, it lays out and repaints the chart
            found.first().display = chart
        self._chart_shown = chart
        if redraw:
            self._draw(history, now, span, room)

    def _draw(self, history: Sequence[tuple[float, float]], now: float, span: int, rows: int) -> None:
        from widgets.tps_chart import TpsChart

        found = self.query("#tps-plot")
        p = found.first(TpsChart) if found else TpsChart(id="tps-plot")
        if not found:
            self.mount(p)
        self._drawn_at = now
        width = p.size.width or self.content_region.width  # before its first layout
        series = chart_series(history, now, span, 2 * max(10, width))
        top = max((v for seg in series for _, v in seg), default=1.0)
        yt = nice_ticks(top, min(Y_TICKS, (rows - 3) // 2 + 1))
        picture = _picture(series, span, width, rows, yt)
        if found and picture == self._picture:
            return  # the same dots: redrawing it would write the chart's every row to the terminal for nothing
        self._picture = picture
        plt = p.plt
        plt.clear_data()
        plt.clear_figure()
        for seg in series:
            plt.plot([at for at, _ in seg], [v for _, v in seg], marker="braille", color="cyan")
        # rows: the frame's two and the x labels' one; a y tick every second row at most, and six at most
        plt.ylim(0, yt[-1])
        plt.yticks(yt, [tick_label(v) for v in yt])
        xt, xl = x_ticks(span)
        plt.xlim(-span, 0)
        plt.xticks(xt, xl)
        p.redraw()


def _picture(series: Sequence[Sequence[tuple[float, float]]], span: int, width: int, rows: int,
             yt: Sequence[float]) -> tuple[object, ...]:
    """What the chart would show, as the braille dots its samples fall on (two across and four down a cell) and its
    scale: a steady throughput's line moves left as time passes and looks the same, so it need not be redrawn."""
    cols, levels = 2 * max(1, width), 4 * max(1, rows - 3)
    top = yt[-1] or 1.0
    dots = tuple(tuple(sorted({(round((at + span) * cols / span), round(v * levels / top)) for at, v in seg}))
                 for seg in series)
    return (span, width, rows, tuple(yt), dots)
