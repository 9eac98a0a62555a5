"""Runs `bringup` with a count of what each widget paints: lines and cells rendered (`Widget.render_lines`) and refreshes asked
(`Widget.refresh`, whole or by region), per widget, written as JSON to $PAINT_OUT when the process exits.

    PAINT_OUT=paint.json python benchmarks/_paint_counter.py demo

A measuring wrapper, not part of bringup: it wraps two public methods of Textual's Widget from outside. The bytes
each second are counted by whoever reads the terminal (console_paint.py)."""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from textual.drivers.linux_driver import LinuxDriver
from textual.widget import Widget

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LINES: Counter[str] = Counter()
CELLS: Counter[str] = Counter()
RENDERS: Counter[str] = Counter()
WHOLE: Counter[str] = Counter()
REGIONS: Counter[str] = Counter()
LAYOUT: Counter[str] = Counter()
MARK: dict[str, float] = {"t0": time.monotonic()}
#: the widgets that asked for a refresh since the last write to the terminal, and the bytes of the writes that
#: followed each such set: which refreshes the terminal's bytes went to
SINCE: set[str] = set()
FRAME_BYTES: Counter[str] = Counter()
FRAMES: Counter[str] = Counter()
CALLERS: Counter[str] = Counter()


def _caller() -> str:
    """The nearest frame of bringup's own code (tui/, widgets/) that led to a whole refresh."""
    f = sys._getframe(2)
    while f is not None:
        path = f.f_code.co_filename
        if path.startswith((f"{ROOT}/tui/", f"{ROOT}/widgets/")):
            return f"{Path(path).name}:{f.f_lineno} {f.f_code.co_name}"
        f = f.f_back
    return "textual"


def _name(w: Widget) -> str:
    name = f"{type(w).__name__}#{w.id}" if w.id else type(w).__name__
    if w.id is None and isinstance(w.parent, Widget):  # a scrollbar: whose
        name += f"<{_name(w.parent)}"
    return name


_render_lines = Widget.render_lines
_refresh = Widget.refresh


def render_lines(self: Widget, crop: Any) -> Any:
    strips = _render_lines(self, crop)
    LINES[_name(self)] += len(strips)
    CELLS[_name(self)] += sum(s.cell_length for s in strips)
    RENDERS[_name(self)] += 1
    return strips


def refresh(self: Widget, *regions: Any, **kw: Any) -> Any:
    (REGIONS if regions else WHOLE)[_name(self)] += 1
    if not regions:
        CALLERS[f"{_name(self)} <- {_caller()}"] += 1
    SINCE.add(_name(self) + ("" if regions else "*"))
    if kw.get("layout"):
        LAYOUT[_name(self)] += 1
    return _refresh(self, *regions, **kw)


_write = LinuxDriver.write


def write(self: LinuxDriver, data: str) -> None:
    key = " ".join(sorted(SINCE)) or "(none)"
    SINCE.clear()
    FRAME_BYTES[key] += len(data.encode())
    FRAMES[key] += 1
    _write(self, data)


def reset(*_: Any) -> None:
    """SIGUSR2: start counting now (the parent sends it once the console is ready, so start-up is not counted)."""
    for c in (LINES, CELLS, RENDERS, WHOLE, REGIONS, LAYOUT, FRAME_BYTES, FRAMES, CALLERS):
        c.clear()
    MARK["t0"] = time.monotonic()


def dump() -> None:
    out = os.environ.get("PAINT_OUT")
    if not out:
        return
    Path(out).write_text(json.dumps({
        "seconds": round(time.monotonic() - MARK["t0"], 1),
        "lines_rendered": dict(LINES.most_common()), "cells_rendered": dict(CELLS.most_common()), "render_calls": dict(RENDERS.most_common()),
        "whole_refreshes": dict(WHOLE.most_common()), "region_refreshes": dict(REGIONS.most_common()),
        "layout_refreshes": dict(LAYOUT.most_common()),
        "whole_refresh_callers": dict(CALLERS.most_common()),
        "bytes_by_refreshes": {k: {"bytes": b, "frames": FRAMES[k]} for k, b in FRAME_BYTES.most_common(25)}}, indent=1))


Widget.render_lines = render_lines  # type: ignore[method-assign]
Widget.refresh = refresh  # type: ignore[method-assign]
LinuxDriver.write = write  # type: ignore[method-assign]
signal.signal(signal.SIGUSR2, reset)
atexit.register(dump)

if __name__ == "__main__":
    from tui.cli import main

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # atexit runs
    sys.exit(main(sys.argv[1:]))
