"""Faults at random moments of random restarts on the systemd test host, and the invariants after each
(tests/helpers/fault_harness.py says which): the figures of the README's reliability table.

    bash .ci/testhost.sh build && bash .ci/testhost.sh up && bash .ci/testhost.sh install-sim tui/sim   # as root
    .venv/bin/python benchmarks/faults.py [--rounds 3] [--seed N] [--skip host-reboot]

Each round runs every fault once, in a random order. Writes benchmarks/results/faults.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _simbench import machine  # noqa: E402

from tests.helpers.fault_harness import FAULTS, SCRIPT, Harness, sim_port, summarize, texec, write_config  # noqa: E402


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--skip", action="append", default=[], choices=FAULTS)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    faults = [f for f in FAULTS if f not in args.skip]
    trials = []
    with tempfile.TemporaryDirectory() as tmp:
        ssh = Path(tmp) / "ssh_config"
        subprocess.run(["bash", str(SCRIPT), "ssh-config", str(ssh)], check=True, cwd=ROOT)
        cfg = write_config(Path(tmp), ssh, sim_port())
        t0 = time.time()
        async with Harness(cfg, rng) as h:
            for r in range(args.rounds):
                for fault in rng.sample(faults, len(faults)):
                    t = await h.run(fault)
                    trials.append(t)
                    print(json.dumps({"round": r, **t.as_dict()}), flush=True)
        texec("systemctl", "stop", "sglang-sim.service")
    out = {"seed": seed, "rounds": args.rounds, "seconds": round(time.time() - t0), "machine": machine(),
           "summary": summarize(trials), "trials": [t.as_dict() for t in trials]}
    path = ROOT / "benchmarks" / "results" / "faults.json"
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps(out["summary"], indent=1))


if __name__ == "__main__":
    asyncio.run(main())
