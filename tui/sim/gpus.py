"""Simulated GPUs shared by the reference server and the nvidia-smi stand-in.

The state lives in files, not in a process, so that every reader (the sim GPU source of the demo, the
nvidia-smi stand-in on a remote test host, a second server checking for OOM) sees the same GPUs, and so that
memory can outlive the process that held it: real GPU memory is released some time after a process exits,
GPU by GPU, and the restart logic under test must wait for that.

One holder file per server process, ``<state_dir>/holders/<pid>.json``::

    {"pid": 123, "name": "python3", "gpus": {"0": 72000, ...}, "util": 80, "started": t, "updated": t,
     "exited": null | t, "release_delay": 2.0}

Stdlib only, Python 3.9+: this file is copied alone to remote hosts.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
import zlib
from typing import Any

TOTAL_MIB = 143771  # what nvidia-smi reports for an H200
RESERVED_MIB = 606  # driver-reserved; torch sees TOTAL - RESERVED = 139.81 GiB
CAPACITY_MIB = TOTAL_MIB - RESERVED_MIB
GPU_NAME = "NVIDIA H200"
_UUID_NS = uuid.UUID("6b1f3c9e-0c2d-4f61-9a55-2f8f3d0e7a11")


def default_state_dir() -> str:
    """Where holders live unless told otherwise: one directory per user, shared by all sims on the host."""
    env = os.environ.get("BRINGUP_SIM_STATE")
    if env:
        return env
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", f"bringup-sim-{os.getuid()}")


def default_gpu_count() -> int:
    """GPUs on the simulated host (env ``BRINGUP_SIM_GPUS``, else 8 like the K2.6 hosts)."""
    try:
        return int(os.environ.get("BRINGUP_SIM_GPUS", "8"))
    except ValueError:
        return 8


def gpu_uuid(index: int) -> str:
    """A stable nvidia-smi-shaped UUID, so readers can key GPUs by UUID across samples."""
    return "GPU-" + str(uuid.uuid5(_UUID_NS, str(index)))


def pid_alive(pid: int, since: float | None = None) -> bool:
    """True while the process exists, is not a zombie (which holds no GPU memory) and, when ``since`` is given,
    started no later than that: a pid reused by a newer process must not keep a dead holder's memory forever."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            return False
        if since is not None:
            with open("/proc/stat") as f:
                btime = next(int(x.split()[1]) for x in f if x.startswith("btime "))
            return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK") <= since + 2
    except (OSError, IndexError, ValueError, StopIteration):
        pass
    return True


def release_fraction(pid: int, gpu: int) -> float:
    """When (as a fraction of the release delay) this GPU is freed: 0.3..1.0, fixed per pid and GPU."""
    return 0.3 + 0.7 * (zlib.crc32(f"{pid}:{gpu}".encode()) % 1000) / 999.0


class Holder:
    """The writer side: one server process's claim on simulated GPU memory."""

    def __init__(self, state_dir: str, gpu_ids: list[int], release_delay: float) -> None:
        self.pid = os.getpid()
        self.path = os.path.join(state_dir, "holders", f"{self.pid}.json")
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        now = time.time()
        self.data: dict[str, Any] = {
            "pid": self.pid, "name": "python3", "gpus": {str(g): 0 for g in gpu_ids}, "util": 0,
            "started": now, "updated": now, "exited": None, "release_delay": release_delay,
        }
        self._lock = threading.RLock()
        self._write()

    def _write(self) -> None:
        tmp = f"{self.path}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)

    def update(self, used_mib: dict[int, int] | None = None, util: int | None = None) -> None:
        """Record memory (MiB per GPU) and/or utilization; a no-op once exited, so late threads can't undo."""
        with self._lock:
            if self.data["exited"] is not None:
                return
            if used_mib is not None:
                self.data["gpus"] = {str(g): int(m) for g, m in used_mib.items()}
            if util is not None:
                self.data["util"] = int(util)
            self.data["updated"] = time.time()
            self._write()

    def mark_exited(self) -> None:
        """Start the release clock. Called on every exit path, before the process actually dies."""
        with self._lock:
            if self.data["exited"] is None:
                self.data["exited"] = self.data["updated"] = time.time()
                self.data["util"] = 0
                self._write()


def _load_holders(state_dir: str) -> list[tuple[str, dict[str, Any], float]]:
    hdir = os.path.join(state_dir, "holders")
    out = []
    try:
        names = os.listdir(hdir)
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(hdir, name)
        try:
            mtime = os.stat(path).st_mtime
            with open(path) as f:
                out.append((path, json.load(f), mtime))
        except (OSError, ValueError):
            continue  # vanished or being replaced: skip this sample
    return out


def holder_usage(holder: dict[str, Any], mtime: float, now: float) -> tuple[dict[int, int], bool]:
    """Memory a holder still occupies per GPU at ``now``, and whether its process is alive."""
    pid = int(holder["pid"])
    alive = holder.get("exited") is None and pid_alive(pid, holder.get("started"))
    exit_t = holder.get("exited") or (None if alive else mtime)
    used = {}
    for g, mib in holder.get("gpus", {}).items():
        gi = int(g)
        delay = float(holder.get("release_delay", 0)) * release_fraction(pid, gi)
        held = exit_t is None or now < exit_t + delay
        if held and int(mib) > 0:
            used[gi] = int(mib)
    return used, alive


def read_state(
    state_dir: str, now: float | None = None, n_gpus: int | None = None, exclude_pid: int | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-GPU rows and the compute-process list, as nvidia-smi would show them at ``now``.

    GPU rows: ``{"index", "uuid", "name", "memory_used", "memory_total", "memory_free", "util"}`` (MiB, %).
    Processes: ``{"pid", "name", "gpu", "gpu_uuid", "used_memory", "alive"}``; a dead process is listed
    while it still holds memory on a GPU, like a process still being torn down.
    """
    now = time.time() if now is None else now
    n = default_gpu_count() if n_gpus is None else n_gpus
    used = [0] * n
    util = [0] * n
    procs: list[dict[str, Any]] = []
    for _path, holder, mtime in _load_holders(state_dir):
        if holder.get("pid") == exclude_pid:
            continue
        usage, alive = holder_usage(holder, mtime, now)
        for gi, mib in sorted(usage.items()):
            if 0 <= gi < n:
                used[gi] += mib
                if alive:
                    util[gi] = max(util[gi], int(holder.get("util", 0)))
                procs.append({"pid": holder["pid"], "name": holder.get("name", "python3"), "gpu": gi,
                              "gpu_uuid": gpu_uuid(gi), "used_memory": mib, "alive": alive})
    gpus = [{"index": i, "uuid": gpu_uuid(i), "name": GPU_NAME, "memory_used": min(used[i], CAPACITY_MIB),
             "memory_total": TOTAL_MIB, "memory_free": max(0, CAPACITY_MIB - used[i]), "util": util[i]}
            for i in range(n)]
    return gpus, procs


def prune(state_dir: str, now: float | None = None) -> None:
    """Delete holder files whose memory is fully released, so the directory does not grow forever."""
    now = time.time() if now is None else now
    for path, holder, mtime in _load_holders(state_dir):
        usage, alive = holder_usage(holder, mtime, now)
        if not alive and not usage:
            with contextlib.suppress(OSError):
                os.unlink(path)
