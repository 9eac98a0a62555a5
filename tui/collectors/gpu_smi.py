"""GPU samples from `nvidia-smi`: one long-running `--query-gpu ... -lms` stream per host, plus a slower
`--query-compute-apps` query. Works the same locally and over SSH because it only needs the transport.

Any bracketed value (`[N/A]`, `[Not Supported]`, `[GPU requires reset]`, `[Unknown Error]`, ...) is missing, not
zero; rows that do not parse are skipped, so garbage from the tool can never crash the console.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Sequence

from tui.errors import PermanentError
from tui.guard.numbers import real_or_none, whole_or_none
from tui.guard.text import split_lines
from tui.model import GpuProcess, GpuSample, GpuSnapshot
from tui.transport import Transport, TransportError

QUERY_FIELDS = ("timestamp", "index", "uuid", "name", "memory.used", "memory.total", "utilization.gpu",
                "utilization.memory", "temperature.gpu", "power.draw", "power.limit", "clocks.sm")
APP_FIELDS = ("pid", "process_name", "used_memory", "gpu_uuid")
#: the processes on the GPUs (a command of their own, not the stream's) this often while `quiet`: the fleet's rows
#: show memory and utilisation, not who holds it; a restart's release wait asks for them itself, at once
QUIET_APPS_S = 10.0
#: ... unless a GPU's memory moved by this much since they were read: then at the normal pace (a new run's memory is
#: attributed to it within seconds, not after up to QUIET_APPS_S)
APPS_MOVED_MIB = 256.0
DRIVER_ERRORS = ("NVIDIA-SMI has failed", "No devices were found", "Failed to initialize NVML",
                 "Driver/library version mismatch", "couldn't communicate with the NVIDIA driver")


def _num(v: str) -> float | None:
    v = v.strip()
    if not v or v.startswith("[") or v in ("N/A", "Not Supported"):
        return None
    for unit in (" MiB", " %", " W", " MHz", " C"):
        if v.endswith(unit):
            v = v[: -len(unit)]
    return real_or_none(v, text=True)  # digits only, finite (tui/guard/numbers.py)


def driver_error(text: str) -> str:
    """The first line of a driver failure message, or ''."""
    for line in split_lines(text):
        if any(e in line for e in DRIVER_ERRORS):
            return line.strip()
    return ""


#: a shell's exit status for a command it could not run: 127 not found, 126 found but not executable (over SSH the
#: remote shell runs the command, and says so this way instead of an exec error)
SHELL_CANNOT_RUN = {127: "command not found", 126: "not executable"}


def cannot_run(command: Sequence[str], rc: int, stderr: str) -> str:
    """Why `command` could not be run at all, from its exit status (a shell's 127/126), or "": a permanent error,
    which no wait for readings will fix."""
    what = SHELL_CANNOT_RUN.get(rc)
    if what is None:
        return ""
    said = split_lines(stderr.strip())[-1][:200] if stderr.strip() else ""
    return f"nvidia-smi: cannot run {command[0]!r}: {what} (exit {rc})" + (f": {said}" if said else "")


def parse_gpu_row(line: str, fields: Sequence[str] = QUERY_FIELDS) -> tuple[str, GpuSample] | None:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != len(fields):
        return None
    row = dict(zip(fields, parts, strict=True))
    index = whole_or_none(row.get("index", ""), low=0, text=True)
    if index is None:
        return None
    lost = any(row.get(f, "").startswith("[GPU") or row.get(f, "") == "[Unknown Error]"
               for f in ("memory.used", "utilization.gpu", "name"))
    sample = GpuSample(
        index=index,
        uuid=row.get("uuid", "") if not row.get("uuid", "").startswith("[") else "",
        name=row.get("name", "") if not row.get("name", "").startswith("[") else "",
        mem_used_mib=_num(row.get("memory.used", "")),
        mem_total_mib=_num(row.get("memory.total", "")),
        util_pct=_num(row.get("utilization.gpu", "")),
        mem_util_pct=_num(row.get("utilization.memory", "")),
        temp_c=_num(row.get("temperature.gpu", "")),
        power_w=_num(row.get("power.draw", "")),
        power_limit_w=_num(row.get("power.limit", "")),
        sm_clock_mhz=_num(row.get("clocks.sm", "")),
        lost=lost,
        error=next((row[f] for f in ("memory.used", "name") if row.get(f, "").startswith("[GPU")), ""),
    )
    return row.get("timestamp", ""), sample


def parse_gpu_csv(text: str, fields: Sequence[str] = QUERY_FIELDS) -> list[GpuSample]:
    out = []
    for line in split_lines(text):
        if line.startswith("#"):
            continue
        r = parse_gpu_row(line, fields)
        if r is not None:
            out.append(r[1])
    return out


def parse_apps_csv(text: str, uuid_to_index: dict[str, int] | None = None) -> list[GpuProcess]:
    out = []
    for line in split_lines(text):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or line.startswith("#"):
            continue
        pid = whole_or_none(parts[0], low=0, text=True)
        if pid is None:
            continue
        uuid = parts[3]
        out.append(GpuProcess(pid=pid, name=parts[1], used_mib=_num(parts[2]), gpu_uuid=uuid,
                              gpu_index=(uuid_to_index or {}).get(uuid)))
    return out


class SmiSource:
    """Samples a host's GPUs through nvidia-smi; yields a GpuSnapshot per sample, or one with `error` set."""

    def __init__(self, transport: Transport, command: Sequence[str], interval_ms: int = 500,
                 apps_every_s: float = 2.0, quiet: Callable[[], bool] | None = None) -> None:
        self.transport = transport
        self.command = list(command)
        self.interval_ms = interval_ms
        self.apps_every_s = apps_every_s
        #: true while no one looks at these GPUs' processes (a fleet's rows only): they are asked for less often
        self.quiet = quiet
        self._apps: tuple[GpuProcess, ...] = ()
        self._apps_at = 0.0
        #: each GPU's memory when the processes were last read
        self._apps_mem: dict[int, float] = {}

    def _query(self) -> list[str]:
        return [*self.command, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]

    async def processes(self, gpus: Sequence[GpuSample]) -> tuple[GpuProcess, ...]:
        res = await self.transport.run(
            [*self.command, "--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits"],
            timeout=10)
        if res.rc != 0:
            return ()
        return tuple(parse_apps_csv(res.text, {g.uuid: g.index for g in gpus if g.uuid}))

    async def once(self) -> GpuSnapshot:
        now = time.time()
        try:
            res = await self.transport.run(self._query(), timeout=15)
        except TransportError as e:
            return GpuSnapshot(at=now, error=f"nvidia-smi: {e}", permanent=isinstance(e, PermanentError))
        cannot = cannot_run(self.command, res.rc, res.error_text)
        if cannot:
            return GpuSnapshot(at=now, error=cannot, permanent=True)
        err = driver_error(res.text + "\n" + res.error_text)
        if res.rc != 0 or err:
            return GpuSnapshot(at=now, error=err or f"nvidia-smi failed (exit {res.rc}): {res.error_text[:200]}")
        gpus = parse_gpu_csv(res.text)
        return GpuSnapshot(at=now, gpus=tuple(gpus), processes=await self.processes(gpus))

    async def stream(self) -> AsyncGenerator[GpuSnapshot, None]:
        """One long-lived `-lms` stream; restarted with backoff if it dies."""
        backoff = 1.0
        count = 0
        while True:
            group: list[GpuSample] = []
            stamp = None
            errors: list[str] = []
            argv = [*self._query(), "-lms", str(self.interval_ms)]
            try:
                async with contextlib.aclosing(self.transport.stream(argv)) as lines:
                    async for line in lines:
                        parsed = parse_gpu_row(line)
                        if parsed is None:
                            err = driver_error(line)
                            if err:
                                errors.append(err)
                            continue
                        ts, sample = parsed
                        backoff = 1.0
                        if group and (ts != stamp or sample.index <= group[-1].index):
                            count = count or len(group)  # learnt from the first complete sample
                            yield await self._snapshot(group)
                            group = []
                        stamp = ts
                        group.append(sample)
                        if count and len(group) >= count:
                            yield await self._snapshot(group)
                            group = []
                    if group:
                        yield await self._snapshot(group)
            except TransportError as e:
                if isinstance(e, PermanentError):  # said as such (the release wait does not wait on it)
                    yield GpuSnapshot(at=time.time(), error=f"nvidia-smi: {e}", permanent=True)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 30.0)
                    continue
                errors.append(str(e))
            msg = errors[0] if errors else "nvidia-smi stream ended; restarting"
            yield GpuSnapshot(at=time.time(), error=msg)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def _memory_moved(self, gpus: list[GpuSample]) -> bool:
        """Whether any GPU's memory moved by APPS_MOVED_MIB since the processes were last read: who holds it may
        have changed (a run that just loaded its weights, one that let go), so the quiet pace does not apply."""
        for g in gpus:
            before = self._apps_mem.get(g.index)
            if g.mem_used_mib is not None and (before is None or abs(g.mem_used_mib - before) >= APPS_MOVED_MIB):
                return True
        return False

    async def _snapshot(self, gpus: list[GpuSample]) -> GpuSnapshot:
        now = time.time()
        every = QUIET_APPS_S if self.quiet is not None and self.quiet() else self.apps_every_s
        since = now - self._apps_at
        if since >= every or (since >= self.apps_every_s and self._memory_moved(gpus)):
            self._apps_at = now
            with contextlib.suppress(TransportError):
                self._apps = await self.processes(gpus)
                self._apps_mem = {g.index: g.mem_used_mib for g in gpus if g.mem_used_mib is not None}
        return GpuSnapshot(at=now, gpus=tuple(gpus), processes=self._apps)
