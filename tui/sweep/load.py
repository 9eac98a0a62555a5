"""A sweep's load on one configuration's ready run: the warmup, then each cell's requests (`Load.cell`), measured only
while the run it began on stays up and ready.

The run is read every POLL_S during a cell (a crash cancels the cell's requests), and after one with failed requests
for SETTLE_S more (failed requests may be the first sign of a crash the unit does not show yet): a cell is valid only
on one run, so a figure never mixes two. The requests are the benchmark client's (tui/ops/bench.py), streamed over
SSE, their prompts from prompts.py; the speculative-decoding counters are read from /metrics before and after.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from tui.collectors import server_http
from tui.collectors.bounded import METRICS_MAX, fetch
from tui.managers import ManagerError
from tui.model import Phase, Step, StepStatus
from tui.ops.bench import BenchError, discover_model, one_request
from tui.ops.engine_view import EngineView
from tui.sweep.counters import spec_counters
from tui.sweep.metrics import RequestTiming, SloSpec, SpecCounters, cell_metrics
from tui.sweep.plan import Cell, Plan, SweepConfig
from tui.sweep.prompts import build_prompt
from tui.sweep.results import CellMetrics, CellRecord
from tui.transport import TransportError
from tui.words import plural

#: how often the unit is read during a cell: a crash is noticed within this, and the cell's requests cancelled
POLL_S = 0.5
#: after a cell with failed requests: how long the unit is watched for a crash before the cell is judged
SETTLE_S = 3.0


class Load:
    """The requests a sweep sends to the run of `engine` at `endpoint`, and the cells measured from them. `step`
    records a step under a configuration's name (the warmup's outcome, each cell's start)."""

    def __init__(self, engine: EngineView, plan: Plan, endpoint: Callable[[], str], request_timeout_s: float,
                 slo: SloSpec | None, step: Callable[[str, Step], None]) -> None:
        self.engine = engine
        self.plan = plan
        #: the URL that reaches the configuration's run, asked at each request batch: a forwarded port, and on a
        #: scheduler's deployment the node the run landed on, may change from one configuration to the next
        self._endpoint = endpoint
        self.request_timeout_s = request_timeout_s
        self.slo = slo
        self._step = step
        #: why the last warmup failed (said in the configuration's record)
        self.warmup_error = ""
        #: the model the server serves, asked at each warmup (a configuration may serve it under another name)
        self.model = ""

    @property
    def endpoint(self) -> str:
        return self._endpoint()

    def _client(self, concurrency: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.endpoint, trust_env=False, limits=server_http.limits(concurrency + 4),
                                 timeout=httpx.Timeout(self.request_timeout_s, connect=5.0))

    async def warmup(self, config: SweepConfig) -> bool:
        n = self.plan.matrix.warmup_requests
        try:
            async with self._client(1) as client:
                self.model = await discover_model(client)
                t0 = time.time()
                cell = min(self.plan.cells, key=lambda c: (c.prompt_tokens, c.output_tokens))
                results = [await one_request(client, self.model, build_prompt(cell.prompt_tokens, -1 - i,
                                                                              self.plan.dataset),
                                             cell.output_tokens, self.request_timeout_s) for i in range(n)]
        except BenchError as e:
            self.warmup_error = str(e)
            self._step(config.name, Step("warmup", StepStatus.FAILED, self.warmup_error))
            return False
        ok = sum(r.ok for r in results)
        said = f"{ok}/{plural(n, 'warmup request')} in {time.time() - t0:.1f} s"
        self._step(config.name, Step("warmup", StepStatus.DONE if ok == n else StepStatus.FAILED, said))
        if n and not ok:  # not one answer: the cells would only measure failures (a wrong endpoint, a server that
            # refuses every generation); the configuration failed, said as such, not a clean "0 valid cells"
            self.warmup_error = f"no warmup request succeeded ({said})"
            return False
        return True

    async def _counters(self) -> SpecCounters | None:
        try:
            async with httpx.AsyncClient(base_url=self.endpoint, trust_env=False, timeout=5.0) as c:
                r = await fetch(c, "GET", "/metrics", limit=METRICS_MAX)  # BodyTooLarge is an httpx.HTTPError
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        return spec_counters(r.text)

    async def cell(self, config: SweepConfig, cell: Cell, attempt: int) -> CellRecord:
        self._step(config.name, Step("cell", StepStatus.RUNNING, f"{cell.id} attempt {attempt}"))
        unit = await self.engine.poll_unit()
        inv = unit.invocation
        if not unit.running or self.engine.state.phase != Phase.READY or self.engine.state.invocation != inv:
            return invalid_cell(config.name, cell, attempt, f"not ready before the cell (phase "
                            f"{self.engine.state.phase})", inv)
        before = await self._counters()
        why: list[str] = []
        t0 = time.perf_counter()
        timings: list[RequestTiming] = []
        work = asyncio.create_task(self._requests(cell, timings))
        watch = asyncio.create_task(self._watch(inv, why))
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (work, watch):
                t.cancel()
            await asyncio.gather(work, watch, return_exceptions=True)
        duration = time.perf_counter() - t0
        # after: the same run, still ready; failed requests may be the first sign of a crash the unit does not show
        # yet, so then it is read a few more times before the cell is judged
        settle = time.monotonic() + (SETTLE_S if any(not t.ok for t in timings) else 0.0)
        while not why:
            unit = await self.engine.poll_unit()
            if unit.invocation != inv or not unit.running:
                why.append(f"the run changed during the cell ({inv[:12]} -> {unit.invocation[:12] or 'none'})")
            elif self.engine.state.phase != Phase.READY:
                why.append(f"the server left ready during the cell ({self.engine.state.phase})")
            if time.monotonic() >= settle:
                break
            await self.engine.wait_changed(0.2)
        after = await self._counters() if not why else None
        m = cell_metrics(timings, duration, len(self.engine.deployment_gpus()), self.slo, (before, after))
        if why:
            return CellRecord(config.name, cell.id, cell.prompt_tokens, cell.output_tokens, cell.concurrency,
                              cell.repeat, False, why[0], attempt, inv, m, time.time())
        return CellRecord(config.name, cell.id, cell.prompt_tokens, cell.output_tokens, cell.concurrency,
                          cell.repeat, m.completed > 0, failed_requests(m.failed, m.completed), attempt, inv, m,
                          time.time())

    async def _watch(self, inv: str, why: list[str]) -> None:
        """During a cell: the same invocation, running and ready, read every POLL_S; returns at the first change."""
        while True:
            await asyncio.sleep(POLL_S)
            try:
                unit = await self.engine.poll_unit()
            except (TransportError, ManagerError):
                continue
            if unit.invocation != inv or not unit.running:
                why.append(f"the run changed during the cell ({inv[:12]} -> {unit.invocation[:12] or 'none'}, "
                           f"{unit.active})")
                return
            if self.engine.state.phase != Phase.READY:
                why.append(f"the server left ready during the cell ({self.engine.state.phase})")
                return

    async def _requests(self, cell: Cell, timings: list[RequestTiming]) -> None:
        n = self.plan.requests_for(cell)
        duration = self.plan.matrix.duration_s
        deadline = time.monotonic() + duration if duration else None
        counter = iter(range(10**9))
        async with self._client(cell.concurrency) as client:
            async def worker() -> None:
                while True:
                    i = next(counter)
                    if (n is not None and i >= n) or (deadline is not None and time.monotonic() >= deadline):
                        return
                    prompt = build_prompt(cell.prompt_tokens, i, self.plan.dataset)
                    r = await one_request(client, self.model, prompt, cell.output_tokens, self.request_timeout_s)
                    end = r.total_s if r.ok else None
                    timings.append(RequestTiming(r.ok, tuple(r.chunk_s), r.tokens, end, r.error))
            await asyncio.gather(*(worker() for _ in range(cell.concurrency)))


def failed_requests(failed: int, completed: int) -> str:
    """A cell's reason from its failed requests ("" for none): "1 of 1 request failed", never "of 1 requests"."""
    if completed == 0:
        return f"every request failed ({failed})"
    return f"{failed} of {plural(failed + completed, 'request')} failed" if failed else ""


def invalid_cell(config: str, cell: Cell, attempt: int, reason: str, invocation: str | None) -> CellRecord:
    """A cell that was not measured, or not on one run that stayed ready, and why."""
    return CellRecord(config, cell.id, cell.prompt_tokens, cell.output_tokens, cell.concurrency, cell.repeat, False,
                      reason, attempt, invocation or None, CellMetrics(), time.time())
