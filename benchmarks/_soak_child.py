"""Runs `bringup` with tracemalloc on (one frame a trace: cheap enough for an hour), and on SIGUSR2 writes the top
allocation sites by file and line to $SOAK_DIR/snapshot-N.json (N counting from 0): console_soak.py compares them
to say what grew. A measuring wrapper, not part of bringup.

    SOAK_DIR=d python benchmarks/_soak_child.py demo
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COUNT = {"n": 0}


def _short(path: str) -> str:
    """A file as the package or the checkout names it (`textual/strip.py`, `tui/...`): results carry no path of the
    machine they ran on."""
    if "site-packages/" in path:
        return path.rsplit("site-packages/", 1)[1]
    root = f"{ROOT}/"
    return path[len(root):] if path.startswith(root) else Path(path).name


def snapshot(*_: Any) -> None:
    snap = tracemalloc.take_snapshot()
    stats = snap.statistics("lineno")
    top = [{"where": f"{_short(s.traceback[0].filename)}:{s.traceback[0].lineno}", "kib": round(s.size / 1024, 1),
            "count": s.count} for s in stats[:400]]
    out = Path(os.environ["SOAK_DIR"]) / f"snapshot-{COUNT['n']}.json"
    out.write_text(json.dumps({"traced_kib": round(tracemalloc.get_traced_memory()[0] / 1024, 1), "top": top}))
    COUNT["n"] += 1


if __name__ == "__main__":
    tracemalloc.start(1)
    signal.signal(signal.SIGUSR2, snapshot)
    from tui.cli import main

    sys.exit(main(sys.argv[1:]))
