"""What the console's log panel holds once a busy server has filled it: the view's rows, the buffer's lines, and the
Python memory they keep, measured with tracemalloc in a headless app.

    python benchmarks/log_view_memory.py [--lines 30000]

Feeds the panel (`widgets/error_log.py` `ErrorLog`, all lines shown) the simulated SGLang server's decode line, each
one different, in the engine's batches of 250, flushing after each batch as the console's refresh does; then
counts the rows of the view (Textual's Log) and the lines of the buffer (`widgets/log_buffer.py`), and the memory
traced since before the first line (the panel's lines and their strings, the Log's caches). Run it at two commits to
compare. Writes benchmarks/results/log_view_memory.json (or OUT/).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from textual.app import App, ComposeResult  # noqa: E402

from tui.lifecycle.lines import LineKind  # noqa: E402
from tui.model import LogLine  # noqa: E402
from widgets.error_log import ErrorLog  # noqa: E402

#: the simulated server's decode line, as SGLang 0.5 prints it (tui/sim), with a counter so no two are equal
LINE = ("[2026-12-05 10:00:00 TP0] Decode batch, #running-req: 4, #token: {n}, token usage: 0.02, cuda graph: True, "
        "gen throughput (token/s): 1873.41, #queue-req: 0")


class _Panel(App[None]):
    def compose(self) -> ComposeResult:
        yield ErrorLog(id="errors")


async def measure(lines: int) -> dict[str, object]:
    app = _Panel()
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(ErrorLog)
        panel.set_mode(True)
        await pilot.pause()
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for start in range(0, lines, 250):
            batch = [LogLine(at=1.0, text=LINE.format(n=i)) for i in range(start, min(lines, start + 250))]
            panel.ingest(batch, [LineKind.PLAIN] * len(batch))
            panel.flush()
        await pilot.pause()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        return {"lines_fed": lines, "view_rows": panel.log_view.line_count, "buffer_lines": len(panel.entries),
                "traced_mib": round(held / 2**20, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=30_000)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "commit": commit, **asyncio.run(measure(args.lines))}
    out = Path(os.environ.get("OUT", str(ROOT / "benchmarks" / "results")))
    out.mkdir(parents=True, exist_ok=True)
    (out / "log_view_memory.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
