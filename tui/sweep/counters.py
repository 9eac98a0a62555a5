"""A cell's speculative-decoding counters, read from the server's /metrics page: what its accept length is the
delta of (tui/sweep/metrics.py `accept_from_counters`)."""

from __future__ import annotations

from tui.collectors.metrics import parse_metrics
from tui.sweep.metrics import SpecCounters


def spec_counters(text: str) -> SpecCounters | None:
    """Speculative-decoding counters from a /metrics page; None when the server has none. vLLM counts drafts,
    accepted and drafted tokens. SGLang's `spec_accept_length` is a gauge averaged since start (polluted by warmup,
    probes and earlier cells), but it counts verify forwards (`spec_verify_calls_total`) and generated tokens: over
    a cell, tokens per verify forward is the accept length (accepted drafts plus the bonus token), so the verify
    calls stand for the drafts and the tokens beyond one per verify for the accepted; no rate without draft counts."""
    m = parse_metrics(text)

    def total(name: str) -> float | None:
        vals = [v for _, v in m.get(name, [])]
        return sum(vals) if vals else None
    c = SpecCounters(total("vllm:spec_decode_num_drafts_total"),
                     total("vllm:spec_decode_num_accepted_tokens_total"),
                     total("vllm:spec_decode_num_draft_tokens_total"))
    if all(v is None for v in (c.drafts, c.accepted, c.draft_tokens)):
        # decode tokens counted every step, like the verify forwards; generation_tokens_total counts a request's
        # tokens only when it finishes, so long requests in flight across the cell would skew the ratio
        decode = [v for labels, v in m.get("sglang:realtime_tokens_total", []) if labels.get("mode") == "decode"]
        verify = total("sglang:spec_verify_calls_total")
        tokens = sum(decode) if decode else total("sglang:generation_tokens_total")
        if verify is None or tokens is None:
            return None
        c = SpecCounters(drafts=verify, accepted=tokens - verify)
    return c
