"""What vLLM says about its own work (the vLLM preset's `metrics`, `log_throughput`, `memory_budget`, `metrics_hint`
and `detection`), from the released wheels 0.8.5 to 0.34.0.

/metrics is always served; its `vllm:*` figures come from the stat loggers, which `--disable-log-stats` turns off.
V1 (`vllm/v1/metrics/loggers.py` `PrometheusStatLogger`) keeps one logger for all the engines an API server manages,
each engine's series labelled `model_name` and `engine` (the data-parallel rank as a string, `engine_idxs` from
`engine_ranks_managed`); every engine counts its own requests, so the server's figures are the sum over engines. There
is no rank below an engine on the page (TP workers do not export), so every series is summed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tui.lifecycle.presets.telemetry import MemoryBudget, MetricsHint, MetricsSpec, RankRule, Series, to_float, to_int
from tui.model import ThroughputSample

METRICS = MetricsSpec(
    decode_tokens=Series("vllm:generation_tokens_total"),
    running=Series("vllm:num_requests_running"),
    queued=Series("vllm:num_requests_waiting"),
    spec_drafts=Series("vllm:spec_decode_num_drafts_total"),
    spec_accepted=Series("vllm:spec_decode_num_accepted_tokens_total"),
    spec_draft_tokens=Series("vllm:spec_decode_num_draft_tokens_total"),
    ttft_histogram="vllm:time_to_first_token_seconds",
    ranks=RankRule(),  # one series per engine (`engine` label): all summed
)

#: `--gpu-memory-utilization` (0.9 when not given)
MEMORY_BUDGET = MemoryBudget("--gpu-memory-utilization", 0.9)

METRICS_HINT = MetricsHint("--disable-log-stats", on=False)

#: lines only vLLM writes; its own logger prefix (`INFO 11-24 11:43:54 [file.py:12] `, older `... file.py:12] `) is
#: vLLM's alone
DETECTION = re.compile(r"vLLM|EngineCore|\[(?:gpu_model_runner|core|api_server|loader|worker)\.py:\d+\]|"
                       r"Avg prompt throughput|vllm\.|"
                       r"(?:^|\) )(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? "
                       r"\[?[\w./-]+\.py:\d+\]", re.I)

_SPEC = re.compile(r"Mean acceptance length: (?P<len>[\d.]+)")
_ENGINE = re.compile(r"\bEngine (\d+): ")
_RUN = re.compile(r"Running: (?P<r>\d+) reqs, Waiting: (?P<w>\d+) reqs")


@dataclass(frozen=True, slots=True)
class StatsLines:
    """The stat logger's `Engine 000: Avg prompt throughput: ..., Avg generation throughput: 1523.4 tokens/s, Running:
    64 reqs, Waiting: 3 reqs, ...` line (`line` captures the tokens/s in `tps`), and the speculative decoding line
    `SpecDecoding metrics: Mean acceptance length: 2.63, ...`, a sample with only its acceptance length."""

    line: re.Pattern[str]
    #: the stat logger writes every `VLLM_LOG_STATS_INTERVAL` (10 s) for each engine, and once more with zeros when
    #: an engine goes idle: an engine silent for three intervals is gone
    stale_s: float = 30.0

    def group(self, text: str, ranks: str) -> str:
        """Each engine's line (data parallelism) says which: `Engine 001: ...` (0.34 `v1/metrics/loggers.py`
        `LoggingStatLogger`); `4 Engines Aggregated: ...` (`--aggregate-engine-logging`) and V0's line are the
        whole server's."""
        m = _ENGINE.search(text)
        return m[1] if m else ""

    def __call__(self, text: str, at: float) -> ThroughputSample | None:
        m = self.line.search(text)
        if m:
            r = _RUN.search(text)
            return ThroughputSample(at=at, tokens_per_s=to_float(m["tps"]), source="log",
                                    running=to_int(r["r"]) if r else None, queued=to_int(r["w"]) if r else None)
        s = _SPEC.search(text)
        if s:
            return ThroughputSample(at=at, tokens_per_s=None, source="log", accept_len=to_float(s["len"]))
        return None
