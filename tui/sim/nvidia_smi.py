"""A stand-in for ``nvidia-smi`` that prints the simulated GPUs (see gpus.py) in nvidia-smi's CSV format.

It lets the remote GPU collector run unchanged against a test host without GPUs: it supports exactly
the invocations a monitor uses (``--query-gpu`` with ``-lms``/``-l`` loops, ``--query-compute-apps``,
``-L``), with nvidia-smi's header names, units and error exit code. Stdlib only, Python 3.9+: copied
alone to remote hosts.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from . import gpus
except ImportError:
    import gpus  # type: ignore[no-redef]

# field -> (header with unit, unit suffix or "")
GPU_FIELDS: dict[str, tuple[str, str]] = {
    "index": ("index", ""), "uuid": ("uuid", ""), "name": ("name", ""), "count": ("count", ""),
    "driver_version": ("driver_version", ""), "pci.bus_id": ("pci.bus_id", ""),
    "memory.used": ("memory.used [MiB]", " MiB"), "memory.total": ("memory.total [MiB]", " MiB"),
    "memory.free": ("memory.free [MiB]", " MiB"), "memory.reserved": ("memory.reserved [MiB]", " MiB"),
    "utilization.gpu": ("utilization.gpu [%]", " %"), "utilization.memory": ("utilization.memory [%]", " %"),
    "temperature.gpu": ("temperature.gpu", ""), "power.draw": ("power.draw [W]", " W"),
    "power.limit": ("power.limit [W]", " W"), "clocks.sm": ("clocks.current.sm [MHz]", " MHz"),
    "clocks.current.sm": ("clocks.current.sm [MHz]", " MHz"), "pstate": ("pstate", ""),
    "timestamp": ("timestamp", ""),
}
APP_FIELDS: dict[str, tuple[str, str]] = {
    "pid": ("pid", ""), "process_name": ("process_name", ""), "name": ("process_name", ""),
    "used_memory": ("used_gpu_memory [MiB]", " MiB"), "used_gpu_memory": ("used_gpu_memory [MiB]", " MiB"),
    "gpu_uuid": ("gpu_uuid", ""), "gpu_name": ("gpu_name", ""), "gpu_bus_id": ("gpu_bus_id", ""),
}


def _timestamp(t: float) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def gpu_value(field: str, g: dict[str, Any], n: int, t: float) -> str:
    """One field of one GPU row, before units; thermal/power follow utilization so charts move with load."""
    util = int(g["util"])
    values: dict[str, Any] = {
        "index": g["index"], "uuid": g["uuid"], "name": g["name"], "count": n, "driver_version": "580.159.04",
        "pci.bus_id": f"00000000:{0x18 + 0x10 * g['index']:02X}:00.0", "memory.used": g["memory_used"],
        "memory.total": g["memory_total"], "memory.free": g["memory_free"],
        "memory.reserved": gpus.RESERVED_MIB,
        "utilization.gpu": util, "utilization.memory": util * 6 // 10,
        "temperature.gpu": int(35 + util * 0.4), "pstate": "P0", "timestamp": _timestamp(t),
        "power.draw": f"{120 + util * 5.5 + random.uniform(-1.5, 1.5):.2f}", "power.limit": "700.00",
        "clocks.sm": 1980, "clocks.current.sm": 1980,
    }
    return str(values[field])


def _row(fields: list[str], table: dict[str, tuple[str, str]], get: Any, units: bool) -> str:
    return ", ".join(get(f) + (table[f][1] if units else "") for f in fields)


def main(argv: list[str] | None = None) -> int:
    """Parse nvidia-smi's options and print; loops forever with -lms/-l, flushing every sample."""
    p = argparse.ArgumentParser(prog="nvidia-smi", allow_abbrev=False)
    p.add_argument("--query-gpu")
    p.add_argument("--query-compute-apps")
    p.add_argument("--format", default="csv")
    p.add_argument("-lms", "--loop-ms", type=int)
    p.add_argument("-l", "--loop", type=float)
    p.add_argument("-L", "--list-gpus", action="store_true")
    p.add_argument("-i", "--id", help="comma-separated GPU indices to show")
    p.add_argument("--sim-state-dir", default=gpus.default_state_dir())
    p.add_argument("--sim-gpus", type=int, default=gpus.default_gpu_count())
    a = p.parse_args(argv)
    fmt = set(a.format.split(","))
    header, units = "noheader" not in fmt, "nounits" not in fmt
    query = a.query_gpu or a.query_compute_apps
    table = GPU_FIELDS if a.query_gpu else APP_FIELDS
    fields = [f.strip() for f in query.split(",")] if query else []
    for f in fields:
        if f not in table:
            print(f'Field "{f}" is not a valid field to query.\n')
            return 2
    interval = a.loop_ms / 1000.0 if a.loop_ms else a.loop
    first = True
    while True:
        t = time.time()
        rows, procs = gpus.read_state(a.sim_state_dir, t, a.sim_gpus)
        n = len(rows)
        if a.id:
            ids = {int(x) for x in a.id.split(",")}
            rows, procs = [g for g in rows if g["index"] in ids], [p for p in procs if p["gpu"] in ids]
        out: list[str] = []
        if a.list_gpus:
            out = [f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})" for g in rows]
        elif a.query_gpu:
            if header and first:
                out.append(", ".join(GPU_FIELDS[f][0] for f in fields))
            for g in rows:
                out.append(_row(fields, GPU_FIELDS, lambda f, g=g, n=n, t=t: gpu_value(f, g, n, t), units))
        elif a.query_compute_apps:
            if header and first:
                out.append(", ".join(APP_FIELDS[f][0] for f in fields))
            for pr in procs:
                vals = {"pid": pr["pid"], "process_name": pr["name"], "name": pr["name"],
                        "used_memory": pr["used_memory"], "used_gpu_memory": pr["used_memory"],
                        "gpu_uuid": pr["gpu_uuid"], "gpu_name": gpus.GPU_NAME,
                        "gpu_bus_id": f"00000000:{0x18 + 0x10 * pr['gpu']:02X}:00.0"}
                out.append(_row(fields, APP_FIELDS, lambda f, v=vals: str(v[f]), units))
        else:
            print("sim nvidia-smi: only --query-gpu, --query-compute-apps and -L are simulated",
                  file=sys.stderr)
            return 2
        if out:
            sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
        first = False
        if not interval:
            return 0
        time.sleep(max(0.0, interval - (time.time() - t)))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (KeyboardInterrupt, BrokenPipeError):
        sys.exit(0)
