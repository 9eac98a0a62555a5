"""bringup's engine alone, for one deployment, until it is killed: every collector the console runs (unit state,
the log, GPUs, probes, metrics), with a listener that takes each update and draws nothing.

    python benchmarks/_engine_only.py --config FILE DEPLOYMENT [--seconds S] [--profile FILE]

console_vs_nvitop.py runs it next to the console, in the same windows: the console's CPU less this is what drawing
costs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tui.config.settings import load
from tui.engine import Engine, Update


async def follow(config: str, name: str, seconds: float | None) -> None:
    settings = load(config)
    w = Engine(settings, name, settings.deployments[name])
    seen: list[Update] = []

    def took(u: Update) -> None:  # what the console's listener gets, dropped at once
        seen.append(u)
        seen.clear()

    w.subscribe(took)
    await w.start()
    try:
        await asyncio.sleep(seconds if seconds is not None else float("inf"))
    finally:
        await w.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("deployment")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until killed)")
    ap.add_argument("--profile", metavar="FILE", help="write a cProfile of the whole run to FILE")
    args = ap.parse_args()
    if args.profile:
        import cProfile

        cProfile.runctx("asyncio.run(follow(args.config, args.deployment, args.seconds))", globals(),
                        {"args": args}, filename=args.profile)
    else:
        asyncio.run(follow(args.config, args.deployment, args.seconds))


if __name__ == "__main__":
    main()
