"""What SGLang says about its own work (the SGLang preset's `metrics`, `log_throughput`, `memory_budget`,
`metrics_hint` and `detection`), from the released wheels 0.4.10 to 0.5.23.

/metrics (`--enable-metrics`): each scheduler process with `attn_tp_rank == 0` (and `attn_cp_rank == 0` in 0.5.23),
or every scheduler with `--enable-metrics-for-all-schedulers`, exports its own figures, labelled `tp_rank`, `pp_rank`,
`moe_ep_rank` (0.5.10+) and, when a data-parallel controller launched it, `dp_rank` (0.5.23
`sglang/srt/observability/metrics_collector.py` `SchedulerMetricsCollector.init_new`; 0.4.10-0.5.5
`sglang/srt/managers/scheduler_metrics_mixin.py` `init_metrics`). With data-parallel attention
(`--enable-dp-attention`) every DP group is one attention-TP group of the one TP group: its rank 0 exports with the
global `tp_rank` (0, 2, 4, 6 for dp=4 tp=8) and `dp_rank` = tp_rank // (tp / dp)
(`data_parallel_controller.py` `launch_tensor_parallel_group`, `compute_dp_attention_world_info`). Each counts its own
batch, so the server's figure is the sum over `dp_rank` groups; ranks of one group (`tp_rank`, `pp_rank`,
`moe_ep_rank`: several export with --enable-metrics-for-all-schedulers, every PP stage exports) report the same batch
and count once. From 0.5.10 `num_running_reqs`/`num_queue_reqs` also carry a per-priority breakdown under
`priority="<n>"` when priority scheduling is on; the total is the `priority=""` series.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tui.lifecycle.presets.telemetry import MemoryBudget, MetricsHint, MetricsSpec, RankRule, Series, to_float, to_int
from tui.model import ThroughputSample

_TOTAL = (("priority", ""),)

METRICS = MetricsSpec(
    # decode tokens counted at every decode step (0.5.7+ by the facts, report_decode_stats); before, the gauge only
    decode_tokens=Series("sglang:realtime_tokens_total", (("mode", "decode"),)),
    tokens_per_s=Series("sglang:gen_throughput"),
    running=Series("sglang:num_running_reqs", _TOTAL),
    queued=Series("sglang:num_queue_reqs", _TOTAL),
    accept_len=Series("sglang:spec_accept_length"),
    accept_rate=Series("sglang:spec_accept_rate"),  # 0.5.4+
    ttft_histogram="sglang:time_to_first_token_seconds",  # the tokenizer manager's: one series per label set
    ranks=RankRule(rank_labels=("tp_rank", "pp_rank", "moe_ep_rank")),
    # the sweep reads the accept length of a cell from these (tui/sweep/counters.py)
    also_keep=("sglang:generation_tokens_total", "sglang:spec_verify_calls_total"),
)

#: `--mem-fraction-static`: weights and KV cache; SGLang picks about 0.88-0.91 by GPU size when it is not given
MEMORY_BUDGET = MemoryBudget("--mem-fraction-static", 0.9)

METRICS_HINT = MetricsHint("--enable-metrics")

#: lines only SGLang writes: a replay told which server wrote a log counts the lines each server's pattern finds
DETECTION = re.compile(r"server_args=|fired up and ready|Load weight (?:begin|end)|Capture cuda graph|TP\d+\]|"
                       r"Decode batch|sglang|launch_server\.py|\[gpu_id=\d+\]|"
                       r"^\[?\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?(?: [A-Z_]+\d+)*\] ", re.I)

_KV = re.compile(r"(#?[\w .()/-]+?):\s*([-\d.]+|True|False)")


#: the data-parallel rank of a line's prefix (`[2026-05-31 18:31:21 DP6 TP6] `)
_DP = re.compile(r"\bDP(\d+)\b")


@dataclass(frozen=True, slots=True)
class DecodeBatchLine:
    """The scheduler's `Decode batch, #running-req: 32, ..., gen throughput (token/s): 1635.11, #queue-req: 0` line
    (`line` captures what follows the words in `rest`); `accept len` and `accept rate` under speculative decoding.

    Which schedulers write it (0.5.23 `managers/scheduler_components/metrics_reporter.py` `report_decode_stats`,
    whether or not /metrics is on): those with `is_stats_logging_rank`, `attn_tp_rank == 0 and attn_cp_rank == 0`
    (`observability/metrics_collector.py`): one per attention group. With data parallelism (`--dp`, with or without
    `--enable-dp-attention`) each group runs its own batch and its line carries its own figures, and the logger's
    prefix names its DP rank (`scheduler.py` `configure_scheduler_process`: `[time DP{dp} PP{pp} ... TP{tp}] `, the
    DP rank global across nodes): the group is that rank. Every pipeline stage of one group may log the same batch:
    the group is the DP rank alone, so they count once."""

    line: re.Pattern[str]
    #: a decode line is written every `--decode-log-interval` (40) decode steps: a busy group writes several a
    #: second; one whose newest line is this much older than another's has no batch any more
    stale_s: float = 10.0

    def group(self, text: str, ranks: str) -> str:
        m = _DP.search(ranks)
        return m[1] if m else ""

    def __call__(self, text: str, at: float) -> ThroughputSample | None:
        m = self.line.search(text)
        if not m:
            return None
        kv = {k.strip(): v for k, v in _KV.findall(m["rest"])}
        return ThroughputSample(
            at=at, tokens_per_s=to_float(kv.get("gen throughput (token/s)")), source="log",
            running=to_int(kv.get("#running-req")), queued=to_int(kv.get("#queue-req")),
            accept_len=to_float(kv.get("accept len")), accept_rate=to_float(kv.get("accept rate")))
