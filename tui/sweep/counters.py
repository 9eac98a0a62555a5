"""A cell's speculative-decoding counters, read from the server's /metrics page: what its accept length is the
delta of (tui/sweep/metrics.py `accept_from_counters`).

Read in the released wheels: vLLM counts drafts (verify steps), draft tokens and accepted tokens together, each
scheduler step (`SpecDecodingProm.observe`), so 1 + d(accepted) / d(drafts) over a cell is its mean acceptance length.
SGLang 0.5.15+ counts a request's generated tokens (`generation_tokens_total`, one series per `is_streaming` from
0.5.18) and its verify forwards (`spec_verify_calls_total`) in the tokenizer process when the request finishes
(`TokenizerMetricsCollector.observe_one_finished_request`): d(tokens) / d(verify calls) over a cell is SGLang's own
per-request formula (completion tokens / verify calls) pooled over the requests that finished in it, both counted on
the same clock. Its `realtime_tokens_total{mode="decode"}` is counted every decode step by the scheduler instead: over
verify calls counted at finish it is biased whenever a request straddles an edge of the cell. Its
`spec_accept_length` gauge is the mean over the last decode-log interval only (`report_decode_stats` resets the
window): a moment, not the cell. Before 0.5.15 there is no verify counter, and no accept length from /metrics.
"""

from __future__ import annotations

from tui.collectors.metrics import parse_metrics
from tui.sweep.metrics import SpecCounters

#: the sample names read here (parse_metrics keeps lines by these prefixes)
NAMES = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total",
         "vllm:spec_decode_num_draft_tokens_total", "sglang:generation_tokens_total",
         "sglang:spec_verify_calls_total", "sglang:spec_accept_length")

#: what a cell says when its SGLang speculates but has no verify counter
SGLANG_NO_VERIFY_COUNTER = ("accept length not available from /metrics: this SGLang release has no "
                            "sglang:spec_verify_calls_total counter (0.5.15 and later have it)")


def spec_counters(text: str) -> SpecCounters | None:
    """Speculative-decoding counters from a /metrics page; None when the server has none (and is not speculating).
    An SGLang counter with labels has no series until its first increment: a missing one reads as None here and as 0
    in a delta whose other end has it."""
    m = parse_metrics(text, NAMES)

    def total(name: str) -> float | None:
        vals = [v for _, v in m.get(name, [])]
        return sum(vals) if vals else None
    c = SpecCounters(total("vllm:spec_decode_num_drafts_total"),
                     total("vllm:spec_decode_num_accepted_tokens_total"),
                     total("vllm:spec_decode_num_draft_tokens_total"))
    if any(v is not None for v in (c.drafts, c.accepted, c.draft_tokens)):
        return c
    tokens = total("sglang:generation_tokens_total")  # summed over is_streaming (0.5.18+) and any other label
    verify = total("sglang:spec_verify_calls_total")
    if verify is not None:
        return SpecCounters(finished_tokens=tokens, verify_calls=verify)
    gauge = [v for _, v in m.get("sglang:spec_accept_length", [])]
    if any(v > 0 for v in gauge):  # speculating (the gauge is 0 without), with no verify counter in this release
        return SpecCounters(finished_tokens=tokens, unavailable=SGLANG_NO_VERIFY_COUNTER)
    if tokens is not None or gauge:
        return SpecCounters(finished_tokens=tokens)  # SGLang, nothing speculative yet
    return None
