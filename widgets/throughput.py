"""Throughput: tokens/s now, a sparkline, a chart of the last minutes, requests, and the accept length when
speculative decoding is on. Says "no metrics" plainly when the server gives none."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.model import ThroughputSample
from widgets.gpus import spark
from widgets.lifecycle import set_text


def downsample(points: Sequence[tuple[float, float]], n: int) -> list[tuple[float, float]]:
    """At most `n` points: consecutive samples averaged in groups. A braille chart draws two points per column;
    plotting more costs plotext time in proportion (300 points took 14 ms to build, 112 took 8) and shows
    nothing more."""
    if n <= 0 or len(points) <= n:
        return list(points)
    out = []
    size = len(points) / n
    for k in range(n):
        group = points[int(k * size): int((k + 1) * size)]  # size > 1: never empty
        out.append((group[-1][0], sum(v for _, v in group) / len(group)))
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


class ThroughputPanel(Vertical):
    DEFAULT_CLASSES = "panel"

    def compose(self) -> ComposeResult:
        yield Static(id="tps-now")
        # the chart is mounted with the first samples: plotext is 30-70 ms of imports the first frame need not wait for

    def show(self, tp: ThroughputSample | None, history: Sequence[tuple[float, float]], note: str = "",
             plot: bool = True, now: float | None = None, serving: bool = True) -> None:
        """`history` is (time, tokens/s); a sample older than 10 s is marked stale (the server stopped
        reporting, e.g. during a restart). When the server is not serving (stopped, failed, starting again) the
        last figures are labelled as such and its request counts are not shown as if current."""
        t = Text()
        values = [v for _, v in history]
        stale = tp is not None and now is not None and now - tp.at > 10
        label = ", the last while it served" if not serving else ", stale" if stale else ""
        if tp is None or tp.tokens_per_s is None:
            t.append("no throughput yet", style="dim")
        else:
            t.append(f"{tp.tokens_per_s:,.1f}", style="bold")
            t.append(" tok/s", style="bold")
            t.append(f"  ({tp.source}{label})", style="dim")
            if values:
                width = max(8, min(60, self.size.width - 4))
                t.append("\n" + spark(values[-width:], width), style="cyan")
        if tp is not None and serving:
            if tp.running is not None:
                t.append(f"\nrunning {tp.running}  queued {tp.queued if tp.queued is not None else '-'}")
            if tp.ttft_s is not None:
                t.append(f"  TTFT {tp.ttft_s * 1000:.0f} ms")
            if tp.accept_len is not None:
                t.append(f"\naccept length {tp.accept_len:.2f}", style="bold cyan")
                if tp.accept_rate is not None:
                    t.append(f"  rate {tp.accept_rate:.2f}", style="cyan")
        if note:
            t.append("\n" + note, style="yellow")
        set_text(self.query_one("#tps-now", Static), t)
        found = self.query("#tps-plot")
        if plot and (history or found):
            from textual_plotext import PlotextPlot

            p = found.first(PlotextPlot) if found else PlotextPlot(id="tps-plot")
            if not found:
                self.mount(p)
            plt = p.plt
            plt.clear_data()
            plt.clear_figure()
            if history:
                end = now if now is not None else history[-1][0]
                budget = 2 * max(10, p.size.width or self.size.width)  # before its first layout
                for seg in segments(history):
                    shown = downsample(seg, max(2, budget * len(seg) // len(history)))
                    plt.plot([at - end for at, _ in shown], [v for _, v in shown], marker="braille", color="cyan")
                plt.xlabel("seconds, 0 = now")
            plt.title("tokens/s")
            p.refresh()
