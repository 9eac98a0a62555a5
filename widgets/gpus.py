"""One row per GPU: memory bar and numbers, utilization, temperature, power and a short memory history.

Missing values show as `-`, a lost GPU as LOST with its error, memory held by processes other than the current
server (the previous run still releasing, or another tenant) is called out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.widgets import Static

from tui.model import Attribution, GpuSnapshot
from tui.ops.release import ranges

SPARK = "▁▂▃▄▅▆▇█"


def spark(values: Sequence[float], width: int, top: float | None = None) -> str:
    vals = list(values)[-width:]
    if not vals:
        return ""
    hi = top if top else max(vals) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, max(0, int(v / hi * (len(SPARK) - 1) + 0.5)))] for v in vals)


def bar(frac: float, width: int) -> str:
    frac = min(1.0, max(0.0, frac))
    full = int(frac * width)
    part = " ▏▎▍▌▋▊▉"[int((frac * width - full) * 8)] if full < width else ""
    return ("█" * full + part).ljust(width)


def _n(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


class GpuPanel(Static):
    DEFAULT_CLASSES = "panel"
    _last: Text | None = None

    def show(self, snap: GpuSnapshot | None, history: Mapping[int, Sequence[float]], gpus: Sequence[int],
             server_pid: int = 0, releasing: bool = False, attribution: Attribution | None = None) -> None:
        rows = self.render_rows(snap, history, gpus, server_pid, releasing, max(30, self.size.width - 2),
                                attribution)
        if rows != self._last:
            self._last = rows
            self.update(rows, layout=False)  # the panel's size never depends on its rows

    @staticmethod
    def render_rows(snap: GpuSnapshot | None, history: Mapping[int, Sequence[float]], gpus: Sequence[int],
                    server_pid: int, releasing: bool, width: int, attribution: Attribution | None = None) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        if snap is None:
            t.append("waiting for the first GPU sample…", style="dim")
            return t
        if snap.error and not snap.gpus:
            t.append(snap.error, style="yellow")
            return t
        mine = set(gpus)
        a = attribution
        if a is not None and a.previous_mib > 0:
            t.append(f"previous run still holds {a.previous_mib / 1024:.1f} GiB on GPU {ranges(a.previous_gpus)}\n",
                     style="bold yellow")
        elif releasing:  # no process tree known: during the release wait every process here is the old run's
            old = [p for p in snap.processes if p.gpu_index in mine and p.pid != server_pid]
            held = sum(p.used_mib or 0 for p in old) / 1024
            pids = ",".join(sorted({str(p.pid) for p in old})[:3])
            t.append(f"releasing: {held:.1f} GiB still held by the previous run" + (f" (pid {pids})" if pids else "")
                     + "\n", style="bold yellow")
        spark_w = max(0, min(12, width - 46))
        bar_w = max(6, min(20, width - 34 - spark_w))
        for g in snap.gpus:
            mark = "▸" if g.index in mine else " "
            t.append(f"{mark}{g.index:>2} ", style="bold" if g.index in mine else "dim")
            if g.lost:
                t.append(f"LOST {g.error or 'GPU lost'}\n", style="bold red")
                continue
            if g.mem_used_mib is not None and g.mem_total_mib:
                frac = g.mem_used_mib / g.mem_total_mib
                style = "red" if frac > 0.95 else "yellow" if frac > 0.85 else "green"
                filled = bar(frac, bar_w).rstrip()
                t.append(filled, style=style)
                t.append("░" * (bar_w - len(filled)), style="dim")
                t.append(f" {g.mem_used_mib / 1024:5.1f}/{g.mem_total_mib / 1024:.0f}G")
            else:
                t.append(" " * bar_w + "     -/-  ")
            t.append(f" {_n(g.util_pct, '3.0f'):>3}%", style="bold" if (g.util_pct or 0) > 50 else "")
            t.append(f" {_n(g.temp_c, '.0f'):>3}°C {_n(g.power_w, '.0f'):>4}W", style="dim")
            if spark_w:
                t.append(" " + spark(history.get(g.index, ()), spark_w, g.mem_total_mib), style="cyan")
            t.append("\n")
        if a is not None and a.other_mib > 0 and not a.note:
            t.append(f"other processes: {a.other_mib / 1024:.1f} GiB\n", style="yellow")
        if a is not None and a.note:
            t.append(a.note + "\n", style="dim")
        if snap.error:
            t.append(snap.error, style="yellow")
        return t
