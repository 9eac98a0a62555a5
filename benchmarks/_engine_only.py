"""bringup's engine alone, for one deployment, until it is killed: every collector the console runs (unit state,
the log, GPUs, probes, metrics), with a listener that takes each update and draws nothing.

    python benchmarks/_engine_only.py --config FILE DEPLOYMENT

console_vs_nvitop.py runs it next to the console, in the same windows: the console's CPU less this is what drawing
costs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tui.config import load
from tui.engine import Update, Watch


async def follow(config: str, name: str) -> None:
    settings = load(config)
    w = Watch(settings, name, settings.deployments[name])
    seen: list[Update] = []

    def took(u: Update) -> None:  # what the console's listener gets, dropped at once
        seen.append(u)
        seen.clear()

    w.subscribe(took)
    await w.start()
    try:
        await asyncio.Event().wait()
    finally:
        await w.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("deployment")
    args = ap.parse_args()
    asyncio.run(follow(args.config, args.deployment))


if __name__ == "__main__":
    main()
