"""Throughput (tui/collectors/metrics.py): Prometheus pages (real fixtures), counter rates across scrapes with
reset detection, and the servers' own periodic log lines (the released wheels and 8, and real logs in
tests/fixtures/logs/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.collectors.metrics import MetricsRates, from_log_line, parse_metrics
from tui.lifecycle.presets import get_preset

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SGLANG = get_preset("sglang")
VLLM = get_preset("vllm")


# ------------------------------------------------------------------------------------------------ pages


@pytest.mark.parametrize("name", sorted(p.name for p in (FIX / "metrics").glob("*.txt")))
def test_fixture_pages_parse(name: str) -> None:
    text = (FIX / "metrics" / name).read_text(encoding="utf-8")
    m = parse_metrics(text)
    assert isinstance(m, dict)
    rates = MetricsRates()
    rates.sample(text, 1.0)
    rates.sample(text, 2.0)


def test_sglang_docs_page_values() -> None:
    # docs.sglang.io production_metrics sample
    m = parse_metrics((FIX / "metrics" / "sglang_docs_production_metrics.txt").read_text(encoding="utf-8"))
    assert m["sglang:generation_tokens_total"] == [({"model_name": "meta-llama/Llama-3.1-8B-Instruct"}, 7557572.0)]
    # prefix filter: metrics bringup does not use are never parsed
    assert "sglang:token_usage" not in m
    assert not any(k.startswith("sglang:time_to_first_token_seconds_bucket") for k in m)
    assert "sglang:time_to_first_token_seconds_sum" in m  # sum and count give the mean TTFT between scrapes


def test_vllm_v1_page_values() -> None:
    # vllm-project/production-stack#318
    text = (FIX / "metrics" / "vllm_v1_metrics_excerpt.txt").read_text(encoding="utf-8")
    m = parse_metrics(text)
    assert set(m) == {"vllm:num_requests_running", "vllm:num_requests_waiting"}
    assert not any(k.startswith("process_") for k in m)
    s = MetricsRates().sample(text, 10.0)
    assert s is not None
    assert (s.running, s.queued) == (0, 0)
    assert s.tokens_per_s is None  # no generation counter on this page


def test_page_without_samples() -> None:
    # MeetKai/functionary PR #263: HELP/TYPE only
    text = (FIX / "metrics" / "vllm_v0_metrics_no_samples.txt").read_text(encoding="utf-8")
    assert parse_metrics(text) == {}
    assert MetricsRates().sample(text, 1.0) is None


def test_one_bad_line_does_not_hide_the_good_ones() -> None:
    text = ('sglang:gen_throughput{tp_rank="0"} 812.5\n'
            'sglang:num_running_reqs{tp_rank="0"} this-is-not-a-number\n'
            'sglang:num_queue_reqs{tp_rank="0"} 3\n')
    m = parse_metrics(text)
    assert m["sglang:gen_throughput"] == [({"tp_rank": "0"}, 812.5)]
    assert m["sglang:num_queue_reqs"] == [({"tp_rank": "0"}, 3.0)]


# ------------------------------------------------------------------------------------------------ rates

# labels as SGLang 0.5.23 writes them for scheduler metrics
_L = 'model_name="moonshotai/Kimi-K2.6",engine_type="unified",pp_rank="0",moe_ep_rank="0"'


def _sglang_page(decode: float, gauge: float | None = None, tp: int = 2) -> str:
    lines = ["# TYPE sglang:realtime_tokens_total counter"]
    for r in range(tp):
        lines.append(f'sglang:realtime_tokens_total{{{_L},tp_rank="{r}",mode="decode"}} {decode}')
        lines.append(f'sglang:realtime_tokens_total{{{_L},tp_rank="{r}",mode="prefill_compute"}} {decode * 10}')
    if gauge is not None:
        lines.append("# TYPE sglang:gen_throughput gauge")
        lines.append(f'sglang:gen_throughput{{{_L},tp_rank="0"}} {gauge}')
    lines.append(f'sglang:num_running_reqs{{{_L},tp_rank="0"}} 32')
    lines.append(f'sglang:num_queue_reqs{{{_L},tp_rank="0"}} 1')
    lines.append(f'sglang:spec_accept_length{{{_L},tp_rank="0"}} 3.2')
    return "\n".join(lines) + "\n"


def test_sglang_counter_rate_across_two_scrapes() -> None:
    r = MetricsRates()
    first = r.sample(_sglang_page(1000.0), 100.0)
    assert first is not None
    assert first.tokens_per_s is None, "one scrape is no rate"
    s = r.sample(_sglang_page(1500.0), 102.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(250.0), "decode tokens of rank 0 only, over 2 s"
    assert (s.running, s.queued) == (32, 1)
    assert s.accept_len == pytest.approx(3.2)
    assert s.source == "metrics"


def test_sglang_counter_reset_gives_none_not_negative() -> None:
    r = MetricsRates()
    r.sample(_sglang_page(50_000.0), 100.0)
    s = r.sample(_sglang_page(120.0), 102.0)  # the server restarted
    assert s is not None
    assert s.tokens_per_s is None
    s = r.sample(_sglang_page(520.0), 104.0)  # and counts from the new value on
    assert s is not None
    assert s.tokens_per_s == pytest.approx(200.0)


def test_sglang_gauge_used_when_no_counter_rate() -> None:
    r = MetricsRates()
    s = r.sample(_sglang_page(1000.0, gauge=1635.11), 100.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(1635.11)


def test_same_or_earlier_timestamp_gives_no_rate() -> None:
    r = MetricsRates()
    r.sample(_sglang_page(1000.0), 100.0)
    s = r.sample(_sglang_page(1100.0), 100.0)
    assert s is not None and s.tokens_per_s is None
    s = r.sample(_sglang_page(1200.0), 99.0)
    assert s is not None and s.tokens_per_s is None


def _vllm_page(gen: float, drafts: float = 0.0, accepted: float = 0.0, drafted: float = 0.0) -> str:
    lab = 'model_name="Qwen/Qwen3-8B",engine="0"'
    return (f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{lab}}} {gen}\n"
            f"vllm:num_requests_running{{{lab}}} 4.0\nvllm:num_requests_waiting{{{lab}}} 0.0\n"
            f"vllm:spec_decode_num_drafts_total{{{lab}}} {drafts}\n"
            f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {accepted}\n"
            f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {drafted}\n")


def test_vllm_counter_rate_and_accept_length() -> None:
    r = MetricsRates()
    r.sample(_vllm_page(10_000, drafts=100, accepted=150, drafted=300), 10.0)
    s = r.sample(_vllm_page(11_240, drafts=200, accepted=313, drafted=600), 20.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(124.0)
    assert (s.running, s.queued) == (4, 0)
    # mean acceptance length = 1 + accepted/drafts
    assert s.accept_len == pytest.approx(1 + 163 / 100)
    assert s.accept_rate == pytest.approx(163 / 300)


def test_vllm_counter_reset() -> None:
    r = MetricsRates()
    r.sample(_vllm_page(10_000), 10.0)
    s = r.sample(_vllm_page(30), 20.0)
    assert s is not None
    assert s.tokens_per_s is None


# ------------------------------------------------------------------------------------------------ log lines


def test_sglang_decode_line_0523_wording() -> None:
    # PR #22166
    s = from_log_line(SGLANG, "[2026-04-05 20:02:51] Decode batch, #running-req: 32, #token: 11179, token usage: "
                              "0.08, cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0", 5.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(1635.11)
    assert (s.running, s.queued) == (32, 0)
    assert s.accept_len is None
    assert s.source == "log"
    assert s.at == 5.0


def test_sglang_eagle3_decode_line_053_wording() -> None:
    # sglang #11948 (~0.5.3): `Decode batch.` and a trailing `, `
    s = from_log_line(SGLANG, "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, token usage: "
                              "0.00, accept len: 2.17, accept rate: 0.54, cuda graph: True, gen throughput (token/s): "
                              "0.39, #queue-req: 0, ", 1.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(0.39)
    assert s.accept_len == pytest.approx(2.17)
    assert s.accept_rate == pytest.approx(0.54)


def test_sglang_decode_line_with_iteration_counter() -> None:
    # per the released wheels: SGLANG_LOG_FORWARD_ITERS=1 starts the line `Decode batch [N],`
    s = from_log_line(SGLANG, "[2026-04-05 20:02:51] Decode batch [1200], #running-req: 8, #token: 900, token "
                              "usage: 0.01, cuda graph: True, gen throughput (token/s): 401.00, #queue-req: 2", 1.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(401.0)
    assert s.queued == 2


def test_sglang_eagle3_fixture_log() -> None:
    lines = (FIX / "logs" / "sglang_eagle3_decode_accept_len.log").read_text(encoding="utf-8").splitlines()
    samples = [s for s in (from_log_line(SGLANG, x, float(i)) for i, x in enumerate(lines)) if s is not None]
    assert len(samples) == 5, "the five Decode batch lines; the Prefill batch line is not a throughput sample"
    assert [s.accept_len for s in samples] == pytest.approx([2.17, 1.95, 1.80, 2.05, 1.80])
    assert [s.tokens_per_s for s in samples] == pytest.approx([0.39, 178.86, 165.41, 188.68, 165.59])
    assert all(s.running == 1 and s.queued == 0 for s in samples)


def test_vllm_engine_and_spec_lines_fixture() -> None:
    # noonghunna/club-3090#93 (the released wheels format)
    lines = (FIX / "logs" / "vllm_dflash_serving_specdecode_metrics.log").read_text(encoding="utf-8").splitlines()
    engine = next(x for x in lines if "Avg generation throughput" in x)
    s = from_log_line(VLLM, engine, 1.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(123.8)
    assert (s.running, s.queued) == (1, 0)
    spec = next(x for x in lines if "SpecDecoding metrics" in x)
    s = from_log_line(VLLM, spec, 1.0)
    assert s is not None
    assert s.accept_len == pytest.approx(2.63)
    assert s.tokens_per_s is None


def test_vllm_engine_line_033_wording() -> None:
    line = ("(APIServer pid=1) INFO 11-24 11:45:00 [loggers.py:236] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 1523.4 tokens/s, Running: 64 reqs, Waiting: 3 reqs, GPU KV cache usage: "
            "12.5%, Prefix cache hit rate: 0.0%")
    s = from_log_line(VLLM, line, 1.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx(1523.4)
    assert (s.running, s.queued) == (64, 3)


@pytest.mark.parametrize(("preset", "line"), [
    (SGLANG, "[2026-06-02 08:00:20 TP0 EP0] Load weight begin. avail mem=94.00 GB"),
    (SGLANG, "[2026-01-10 13:23:26 TP0] Prefill batch, #new-seq: 1, #new-token: 2163, #cached-token: 41, token "
             "usage: 0.01, #running-req: 6, #queue-req: 0, "),
    (VLLM, "(APIServer pid=1) INFO:     172.31.0.1:37016 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK"),
    (VLLM, "(EngineCore_DP0 pid=441) INFO 11-24 11:43:54 [gpu_model_runner.py:3341] Model loading took 2 GiB"),
])
def test_other_lines_are_not_samples(preset, line: str) -> None:
    assert from_log_line(preset, line, 1.0) is None


def test_sglang_decode_line_with_absurd_number_does_not_raise() -> None:
    # regression: a 310+ digit count parsed to inf and int() raised OverflowError
    s = from_log_line(SGLANG, "Decode batch, #running-req: " + "9" * 400 + ", gen throughput (token/s): 1.0", 0.0)
    assert s is not None


# regression: vLLM's `[\\d.]+` groups went to float() unguarded
@pytest.mark.parametrize("line", [
    "(APIServer pid=1) INFO 05-07 04:56:17 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: ., "
    "Accepted throughput: 76.80 tokens/s",
    "(APIServer pid=1) INFO 05-07 04:56:17 [loggers.py:271] Engine 000: Avg prompt throughput: 2.5 tokens/s, "
    "Avg generation throughput: 1.2.3 tokens/s, Running: 1 reqs, Waiting: 0 reqs",
])
def test_vllm_garbled_number_does_not_raise(line: str) -> None:
    s = from_log_line(VLLM, line, 0.0)
    assert s is None or (s.tokens_per_s is None and s.accept_len is None)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from([SGLANG, VLLM]))
def test_log_line_parsing_never_raises(text: str, preset) -> None:
    for line in (text, "Decode batch, " + text, "Avg generation throughput: " + text + " tokens/s",
                 "Mean acceptance length: " + text, "Running: " + text + " reqs, Waiting: 1 reqs"):
        from_log_line(preset, line, 0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=80),
    st.builds(lambda n, v: f"{n}{{tp_rank=\"0\"}} {v}",
              st.sampled_from(["sglang:gen_throughput", "sglang:realtime_tokens_total", "vllm:generation_tokens_total",
                               "sglang:num_running_reqs", "vllm:num_requests_running", "# TYPE sglang:gen_throughput"]),
              # (a 309+ digit integer is test_huge_integer_sample_does_not_raise, a known bug)
              st.one_of(st.floats(), st.sampled_from(["+Inf", "-Inf", "NaN", "1e308", "1e309", "9" * 300]),
                        st.text("0123456789.-+eEx#{}", max_size=10))),
), max_size=15).map("\n".join))
def test_metrics_parsing_never_raises(text: str) -> None:
    parse_metrics(text)
    r = MetricsRates()
    r.sample(text, 1.0)
    r.sample(text, 2.0)


def test_huge_integer_sample_does_not_raise() -> None:
    m = parse_metrics('sglang:gen_throughput{tp_rank="0"} ' + "9" * 400 + "\n")
    assert m.get("sglang:gen_throughput", []) in ([], [({"tp_rank": "0"}, float("inf"))])


# regression: an infinite gauge (or a sum that overflows) raised OverflowError in _int()
@pytest.mark.parametrize("page", [
    'sglang:num_running_reqs{tp_rank="0"} +Inf\n',
    'vllm:num_requests_waiting{model_name="m"} +Inf\n',
    # two finite values whose sum overflows (found by hypothesis)
    'sglang:num_running_reqs{tp_rank="0",dp_rank="0"} 1e308\nsglang:num_running_reqs{tp_rank="0",dp_rank="1"} 1e308\n',
])
def test_infinite_gauge_does_not_raise(page: str) -> None:
    s = MetricsRates().sample(page, 1.0)
    assert s is not None
    assert s.running is None and s.queued is None, "a non-finite value is missing, not a number"


# ------------------------------------------------------------------------------------------------ ranks and groups


@pytest.mark.parametrize("stem", ["sglang_0523_dp_attention", "sglang_0523_dp_attention_all_schedulers"])
@pytest.mark.parametrize("preset", [None, SGLANG], ids=["page-detected", "preset-given"])
def test_sglang_dp_attention_figures_are_the_sum_over_dp_groups(stem: str, preset) -> None:
    """dp=4 tp=8 with --enable-dp-attention: each attention-DP group's rank 0 exports its own batch's figures with its
    global tp_rank (0, 2, 4, 6) and its dp_rank; with --enable-metrics-for-all-schedulers both ranks of a group
    export the same figures. The server's tokens/s, running and queued are the sum over the four groups (reading
    tp_rank 0 alone gave group 0's: a quarter), each group counted once."""
    a = (FIX / "metrics" / f"{stem}_a.txt").read_text(encoding="utf-8")
    b = (FIX / "metrics" / f"{stem}_b.txt").read_text(encoding="utf-8")
    assert a.startswith("# source: rendered with prometheus-client from the definitions in sglang 0.5.23")
    r = MetricsRates(preset)
    first = r.sample(a, 100.0)
    assert first is not None
    # no rate yet: the schedulers' own tokens/s gauges, summed
    assert first.tokens_per_s == pytest.approx(1497.3 + 1466.0 + 1539.8 + 1452.5)
    assert (first.running, first.queued) == (31 + 29 + 33 + 30, 2 + 1 + 0 + 2)
    s = r.sample(b, 102.0)
    assert s is not None
    assert s.tokens_per_s == pytest.approx((3020 + 2960 + 3100 + 2880) / 2.0), "decode tokens of every group, over 2 s"
    assert (s.running, s.queued) == (32 + 30 + 34 + 31, 1 + 0 + 2 + 3)
    assert s.ttft_s == pytest.approx((0.38 + 0.61 + 0.9 + 0.42 + 0.55 + 0.7) / 6)


def test_sglang_ranks_of_one_group_count_once() -> None:
    """Series that differ only in rank labels (tp_rank, pp_rank, moe_ep_rank) are one group's figure: every PP stage
    and, with --enable-metrics-for-all-schedulers, every TP rank reports the same batch."""
    page = "".join(f'sglang:num_running_reqs{{tp_rank="{t}",pp_rank="{p}",moe_ep_rank="{t}"}} 12\n'
                   for t in range(4) for p in range(2))
    s = MetricsRates(SGLANG).sample(page, 1.0)
    assert s is not None and s.running == 12


def test_sglang_per_priority_breakdown_is_not_another_group() -> None:
    """With priority scheduling (0.5.10+) the total is `priority=""`; `priority="<n>"` series are its parts."""
    lab = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    page = (f'sglang:num_running_reqs{{{lab},priority=""}} 9\nsglang:num_running_reqs{{{lab},priority="1"}} 4\n'
            f'sglang:num_running_reqs{{{lab},priority="2"}} 5\nsglang:num_queue_reqs{{{lab},priority=""}} 3\n'
            f'sglang:num_queue_reqs{{{lab},priority="1"}} 3\n')
    s = MetricsRates(SGLANG).sample(page, 1.0)
    assert s is not None and (s.running, s.queued) == (9, 3)


def test_vllm_data_parallel_sums_over_engines() -> None:
    """vLLM V1 with data parallelism: one series per engine (`engine` label, vllm/v1/metrics/loggers.py); every engine
    serves its own requests, so every figure is the sum over engines, acceptance from the summed counters."""
    def page(k: int) -> str:
        out = []
        for e in range(4):
            lab = f'model_name="Qwen/Qwen3-8B",engine="{e}"'
            out += [f"vllm:generation_tokens_total{{{lab}}} {1000 * (e + 1) * k}",
                    f"vllm:num_requests_running{{{lab}}} {e + 1}", f"vllm:num_requests_waiting{{{lab}}} {e}",
                    f"vllm:spec_decode_num_drafts_total{{{lab}}} {100 * k}",
                    f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {(150 + 10 * e) * k}",
                    f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {300 * k}"]
        return "\n".join(out) + "\n"
    for preset in (None, VLLM):
        r = MetricsRates(preset)
        r.sample(page(1), 10.0)
        s = r.sample(page(2), 20.0)
        assert s is not None
        assert s.tokens_per_s == pytest.approx((1000 + 2000 + 3000 + 4000) / 10)
        assert (s.running, s.queued) == (1 + 2 + 3 + 4, 0 + 1 + 2 + 3)
        assert s.accept_len == pytest.approx(1 + (150 + 160 + 170 + 180) / 400)
        assert s.accept_rate == pytest.approx((150 + 160 + 170 + 180) / 1200)
