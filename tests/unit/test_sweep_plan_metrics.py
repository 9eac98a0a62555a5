"""The sweep's pure parts: the plan file (parsing, flags validated as `restart --set` validates them, one-line
errors with the key path) and the metric definitions on hand-made request timings."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tui.lifecycle.presets import get_preset
from tui.sweep.counters import spec_counters
from tui.sweep.estimate import estimate_s
from tui.sweep.metrics import RequestTiming, SloSpec, SpecCounters, accept_from_counters, cell_metrics, percentile
from tui.sweep.plan import Plan, PlanError, parse_plan
from tui.sweep.prompts import build_prompt
from tui.sweep.results import CellRecord, read_results
from tui.sweep.summary import summary_csv, summary_md

SPECS = get_preset("sglang").flags

MATRIX = """
[matrix]
prompt_tokens = [128, 1024]
output_tokens = [64]
concurrency = [1, 8]
requests = 8
"""


def plan(text: str, path: Path = Path("plan.toml")) -> Plan:
    return parse_plan(text, SPECS, path)


def test_configs_and_grid_expand_in_order_with_auto_names_and_cells() -> None:
    p = plan('[[configs]]\nname = "off"\nset = { disable-cuda-graph = true }\nunset = ["enable-metrics"]\n'
             '[grid]\nspeculative-dflash-block-size = [4, 8]\nspeculative-algorithm = ["DFLASH"]\n' + MATRIX)
    assert [c.name for c in p.configs] == ["off", "speculative-dflash-block-size=4,speculative-algorithm=DFLASH",
                                           "speculative-dflash-block-size=8,speculative-algorithm=DFLASH"]
    assert p.configs[0].flags == {"disable-cuda-graph": True, "enable-metrics": None}
    assert p.configs[2].flags == {"speculative-dflash-block-size": "8", "speculative-algorithm": "DFLASH"}
    assert [c.id for c in p.cells] == ["p128-o64-c1-r1", "p128-o64-c8-r1", "p1024-o64-c1-r1", "p1024-o64-c8-r1"]
    assert p.matrix.warmup_requests == 2 and p.matrix.repeats == 1
    # each configuration is applied to the original argv, never on top of the previous one
    base = ["python", "-m", "sglang.launch_server", "--enable-metrics"]
    assert p.configs[0].argv(base, SPECS) == ["python", "-m", "sglang.launch_server", "--disable-cuda-graph"]
    argv = p.configs[1].argv(base, SPECS)
    assert "--enable-metrics" in argv and argv[-4:] == ["--speculative-dflash-block-size", "4",
                                                        "--speculative-algorithm", "DFLASH"]
    assert p.configs[1].carried_by(argv, SPECS) == []
    assert p.configs[1].carried_by(base, SPECS)  # the running argv lacks the flags: said in words
    assert estimate_s(p) > 0


@pytest.mark.parametrize(("text", "error"), [
    ('[[configs]]\nname = "x"\nset = { speculative-algoritm = "DFLASH" }\n' + MATRIX,
     "configs[0].set.speculative-algoritm: unknown flag 'speculative-algoritm' "
     "(did you mean 'speculative-algorithm'?)"),
    ('[[configs]]\nname = "x"\nset = { speculative-algorithm = "FOO" }\n' + MATRIX,
     "configs[0].set.speculative-algorithm: --speculative-algorithm must be one of"),
    ('[[configs]]\nname = "x"\nset = { disable-cuda-graph = 3 }\n' + MATRIX,
     "configs[0].set.disable-cuda-graph: --disable-cuda-graph is a switch"),
    ('[[configs]]\nname = "x"\nunset = ["tp-sise"]\n' + MATRIX, "configs[0].unset[0]: unknown flag 'tp-sise'"),
    ('[[configs]]\nname = "x"\n[matrix]\nprompt_tokens = [1]\noutput_tokens = [1]\nconcurrency = [1, 0]\n',
     "matrix: concurrency[1] must be a positive integer"),
    ('[[configs]]\nname = "x"\n[matrix]\nprompt_tokens = [1]\noutput_tokens = [1]\nconcurrency = [1]\nrequest = 3\n',
     "matrix.request: unknown key 'request' (did you mean 'requests'?)"),
    ('[[configs]]\nname = "x"\n[[configs]]\nname = "x"\n' + MATRIX, "the name 'x' is used twice"),
    (MATRIX, "no configuration"),
    ('[[configs]\n', "not valid TOML"),
    ('[[configs]]\nname = "x"\n[slo]\nttft_ms = -1\n' + MATRIX, "slo.ttft_ms: Input should be greater than 0"),
])
def test_plan_errors_are_one_line_with_the_key_path(text: str, error: str) -> None:
    with pytest.raises(PlanError) as e:
        plan(text)
    msg = str(e.value)
    assert msg.startswith("plan.toml: ") and error in msg and "\n" not in msg, msg


def test_dataset_prompts_replace_generated_ones(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"prompt": p}) for p in ("alpha beta", "gamma")) + "\n")
    p = plan('dataset = "d.jsonl"\n[[configs]]\nname = "x"\n[matrix]\noutput_tokens = [4]\nconcurrency = [1]\n',
             tmp_path / "plan.toml")
    assert p.dataset == ("alpha beta", "gamma") and [c.id for c in p.cells] == ["p0-o4-c1-r1"]
    assert build_prompt(0, 1, p.dataset) == "gamma"
    assert build_prompt(5, 0, p.dataset) == "alpha beta alpha beta alpha"
    (tmp_path / "bad.jsonl").write_text('{"text": "x"}\n')
    with pytest.raises(PlanError, match=r"bad.jsonl:1: each line must be"):
        plan('dataset = "bad.jsonl"\n[[configs]]\nname = "x"\n' + MATRIX, tmp_path / "plan.toml")


def test_generated_prompts_are_deterministic_distinct_and_about_the_length() -> None:
    a, b = build_prompt(256, 3), build_prompt(256, 4)
    assert a == build_prompt(256, 3) and a != b
    assert abs(len(a.split()) - 256) <= 2


def test_metric_definitions_on_hand_made_timings() -> None:
    # request 1: first chunk at 0.1 s, then chunks at 0.2, 0.3, 0.5; 5 tokens (the last chunk carried two); end 0.5
    r1 = RequestTiming(True, (0.1, 0.2, 0.3, 0.5), output_tokens=5, end_s=0.5)
    # request 2: 0.2 s TTFT, 3 tokens, end 0.6
    r2 = RequestTiming(True, (0.2, 0.4, 0.6), output_tokens=3, end_s=0.6)
    bad = RequestTiming(False, error="HTTP 500")
    m = cell_metrics([r1, r2, bad], duration_s=2.0, n_gpus=4, slo=SloSpec(ttft_ms=150, text="ttft_ms<=150"))
    assert (m.completed, m.failed) == (2, 1)
    assert m.ttft_ms.mean == pytest.approx(150.0) and m.ttft_ms.p50 == pytest.approx(150.0)
    # TPOT = (E2EL - TTFT) / (N - 1): (0.5 - 0.1) / 4 = 0.1 s and (0.6 - 0.2) / 2 = 0.2 s
    assert m.tpot_ms.mean == pytest.approx(150.0) and m.tpot_ms.p90 == pytest.approx(190.0)
    # ITL: pooled chunk gaps 0.1, 0.1, 0.2 (request 1) and 0.2, 0.2 (request 2)
    assert m.itl_ms.mean == pytest.approx(160.0) and m.itl_ms.p50 == pytest.approx(200.0)
    assert m.e2el_ms.mean == pytest.approx(550.0)
    assert m.tok_s_total == pytest.approx(4.0)  # 8 tokens of successful requests / 2 s
    assert m.tok_s_gpu == pytest.approx(1.0)
    assert m.tok_s_user == pytest.approx(1 / 0.15, rel=1e-3)  # 1 / mean TPOT
    assert m.req_s == pytest.approx(1.0)
    assert m.goodput_rps == pytest.approx(0.5) and m.slo == "ttft_ms<=150"  # only request 1 meets TTFT <= 150 ms
    assert m.accept_len is None and m.accept_rate is None  # no counters: None, never a made-up figure


def test_percentile_is_linear_between_order_statistics() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([float(x) for x in range(1, 101)], 99) == pytest.approx(99.01)


def test_accept_length_and_rate_are_counter_deltas_over_the_cell() -> None:
    page = ("# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total{{m=\"x\"}} {d}\n"
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
            "vllm:spec_decode_num_accepted_tokens_total{{m=\"x\"}} {a}\n"
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
            "vllm:spec_decode_num_draft_tokens_total{{m=\"x\"}} {t}\n")
    before = spec_counters(page.format(d=1000, a=5000, t=7000))  # a cumulative history from earlier cells
    after = spec_counters(page.format(d=1100, a=5250, t=7700))
    assert accept_from_counters(before, after) == (pytest.approx(3.5), pytest.approx(250 / 700, abs=1e-4))
    assert spec_counters("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\n") is None
    assert accept_from_counters(SpecCounters(10, 10, 10), SpecCounters(5, 5, 5)) == (None, None)  # a reset


def test_reader_takes_a_directory_mid_write(tmp_path: Path) -> None:
    (tmp_path / "records.jsonl").write_text(
        json.dumps({"type": "step", "config": "a", "name": "lock", "status": "done", "detail": "", "at": 1.0})
        + "\n" + '{"type": "cell", "config": "a", "ce')  # a torn last line
    res = read_results(tmp_path)
    assert res.meta is None and len(res.steps) == 1 and res.cells == ()


@dataclass(frozen=True)
class _SpecReq:
    """One request under SGLang speculative decoding: `verifies` verify forwards from step `start`, each giving
    `accept` tokens (accepted drafts + the bonus token); it finishes at step start + verifies."""

    start: int
    verifies: int
    accept: float
    stream: bool = True


def _sglang_page(reqs: list[_SpecReq], at: int, gauge: float, verify_counter: bool = True) -> str:
    """The /metrics page at step `at`, counted as SGLang 0.5.18-0.5.23 counts (read in their wheels): the scheduler
    adds each decode step's tokens to `realtime_tokens_total{mode="decode"}` (metrics_reporter.py
    `report_decode_stats`); the tokenizer process adds a request's generated tokens to `generation_tokens_total`
    {is_streaming} and its verify count to `spec_verify_calls_total` once it finishes (metrics_collector.py
    `observe_one_finished_request`). `verify_counter=False`: a release before 0.5.15, which has none."""
    decode = sum(r.accept * max(0, min(at - r.start, r.verifies)) for r in reqs)  # the steps run before `at`
    done = [r for r in reqs if r.start + r.verifies <= at]
    sch = 'model_name="k",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    tok = 'model_name="k",engine_type="unified"'
    out = ["# TYPE sglang:spec_accept_length gauge", f"sglang:spec_accept_length{{{sch}}} {gauge}",
           "# TYPE sglang:realtime_tokens_total counter",
           f'sglang:realtime_tokens_total{{{sch},mode="decode"}} {decode}',
           "# TYPE sglang:generation_tokens_total counter"]
    for stream in (False, True):
        out.append(f'sglang:generation_tokens_total{{{tok},is_streaming="{str(stream).lower()}"}} '
                   f"{sum(r.verifies * r.accept for r in done if r.stream == stream)}")
    if verify_counter:
        out += ["# TYPE sglang:spec_verify_calls_total counter",
                f"sglang:spec_verify_calls_total{{{tok}}} {sum(r.verifies for r in done)}"]
    return "\n".join(out) + "\n"


def _old_ratio(before: str, after: str) -> float:
    """What the sweep computed before: decode tokens counted per step over verify forwards counted at finish."""
    def read(page: str, name: str) -> float:
        return sum(float(x.split()[-1]) for x in page.splitlines() if x.startswith(name) and
                   (name != "sglang:realtime_tokens_total" or 'mode="decode"' in x))
    d_decode = read(after, "sglang:realtime_tokens_total") - read(before, "sglang:realtime_tokens_total")
    return d_decode / (read(after, "sglang:spec_verify_calls_total") - read(before, "sglang:spec_verify_calls_total"))


def test_sglang_accept_length_of_a_cell_is_tokens_over_verify_calls_both_counted_at_request_finish() -> None:
    """A worked example. The cell runs from step 0 to step 100; every request's accept length is 3.0.
    A started at step -60 (100 verifies, finishes at 40: 120 of its 300 tokens decoded inside the cell);
    B runs 10-60 inside the cell (50 verifies, 150 tokens, not streamed); C starts at 70 (100 verifies, still running
    at 100: 90 tokens decoded inside the cell, none of its verifies counted yet).
    Old: d(decode tokens) / d(verify calls) = (120 + 150 + 90) / (100 + 50) = 2.4, biased by A and C straddling the
    edges. New: d(generation tokens) / d(verify calls) = (300 + 150) / 150 = 3.0, the true value."""
    reqs = [_SpecReq(-60, 100, 3.0), _SpecReq(10, 50, 3.0, stream=False), _SpecReq(70, 100, 3.0)]
    before, after = _sglang_page(reqs, 0, gauge=3.0), _sglang_page(reqs, 100, gauge=3.0)
    assert _old_ratio(before, after) == pytest.approx(2.4)
    length, rate = accept_from_counters(spec_counters(before), spec_counters(after))
    assert length == pytest.approx(3.0) and rate is None  # SGLang has no draft-token counter: no rate

    # requests of different accept lengths: the cell's figure is SGLang's per-request formula (completion tokens /
    # verify calls) pooled over the requests that finished in the cell, A (2.0) and B (4.0): (200 + 200) / 150
    mixed = [_SpecReq(-60, 100, 2.0), _SpecReq(10, 50, 4.0), _SpecReq(70, 100, 3.0)]
    before, after = _sglang_page(mixed, 0, gauge=2.5), _sglang_page(mixed, 100, gauge=3.1)
    assert _old_ratio(before, after) == pytest.approx((40 * 2 + 50 * 4 + 30 * 3) / 150)  # 2.467
    assert accept_from_counters(spec_counters(before), spec_counters(after))[0] == pytest.approx(400 / 150, abs=1e-4)


def test_sglang_before_the_verify_counter_says_the_accept_length_is_not_available(tmp_path: Path) -> None:
    """A release without `spec_verify_calls_total` (0.5.10 and older) speculating (its `spec_accept_length` gauge,
    the mean over the last decode-log interval, above 0): no figure from /metrics, and the cell says why."""
    reqs = [_SpecReq(0, 50, 3.0)]
    before = spec_counters(_sglang_page(reqs, 0, gauge=3.0, verify_counter=False))
    after = spec_counters(_sglang_page(reqs, 100, gauge=3.0, verify_counter=False))
    m = cell_metrics([RequestTiming(True, (0.1, 0.2), 150, 0.2)], 1.0, 1, counters=(before, after))
    assert m.accept_len is None and m.accept_rate is None
    assert m.accept_note is not None and "not available from /metrics" in m.accept_note
    assert "spec_verify_calls_total" in m.accept_note and m.to_json()["accept_note"] == m.accept_note
    # the results say so: records.jsonl keeps the note, summary.csv has it in its column, summary.md in a section
    rec = CellRecord("dflash", "p128-o64-c1-r1", 128, 64, 1, 1, True, "", 1, "run-1", m, 1.0)
    tmp_path.joinpath("records.jsonl").write_text(json.dumps(rec.to_json()) + "\n")
    res = read_results(tmp_path)
    assert res.cells[0].metrics.accept_note == m.accept_note
    assert next(csv.DictReader(io.StringIO(summary_csv(res))))["accept_note"] == m.accept_note
    assert f"## Accept length\n\n- **dflash**: {m.accept_note}" in summary_md(res)
    # no speculative decoding (the gauge stays 0): nothing to say
    plain = spec_counters(_sglang_page(reqs, 100, gauge=0.0, verify_counter=False))
    assert cell_metrics([], 1.0, 1, counters=(plain, plain)).accept_note is None
    # the verify counter has no series until a request with a verify finishes: absent before, present after
    first = spec_counters(_sglang_page(reqs, 0, gauge=0.0).replace("sglang:spec_verify_calls_total{", "#"))
    assert accept_from_counters(first, spec_counters(_sglang_page(reqs, 100, gauge=3.0)))[0] == pytest.approx(3.0)
