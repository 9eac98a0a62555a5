"""Line cleaning (tui/lifecycle/lines.py) and incremental line splitting (tui/transport/lines.py).

Prefixed lines are real wordings from the SGLang/vLLM sources by version, the K2.6 write-ups, or tests/fixtures/logs;
each cites its source.
"""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.lifecycle.lines import (
    MAX_LINE,
    clean,
    continues_block,
    is_error_line,
    is_warning_line,
    sanitize,
    split_output,
)
from tui.transport.lines import LineSplitter

# ------------------------------------------------------------------------------------------------ prefixes

PREFIX_CASES = [
    pytest.param(
        # the K2.6 DFlash deployment (journalctl short format around an SGLang rank-tagged line)
        "May 29 17:01:02 dflash-train python[106324]: [2026-05-29 17:01:02 TP0 EP0] Load weight end. "
        "elapsed=73.65 s, type=KimiK25ForConditionalGeneration, quant=compressed-tensors, avail mem=21.76 GB, "
        "mem usage=72.24 GB.",
        "Load weight end. elapsed=73.65 s, type=KimiK25ForConditionalGeneration, quant=compressed-tensors, "
        "avail mem=21.76 GB, mem usage=72.24 GB.",
        "TP0 EP0", "",
        id="journald-short+sglang-ranks",
    ),
    pytest.param(
        # the same line as `journalctl -o short-iso` prints it
        "2026-05-29T17:01:02+0000 dflash-train python[106324]: [2026-05-29 17:01:02 TP0 EP0] Load weight end. "
        "elapsed=73.65 s",
        "Load weight end. elapsed=73.65 s", "TP0 EP0", "",
        id="journald-iso+sglang-ranks",
    ),
    pytest.param(
        # tests/fixtures/logs/vllm_journald_eager_fork.log (1CatAI/1Cat-vLLM#237): a Russian month name
        "авг 18 14:15:04 llm python3[28059]: (EngineCore pid=28059) INFO 08-18 14:15:04 [vllm.py:1295] "
        "Not auto-setting VLLM_SM70_FLASH_V100_0DOT3_COMPILE_GRAPH=1",
        "Not auto-setting VLLM_SM70_FLASH_V100_0DOT3_COMPILE_GRAPH=1", "EngineCore", "INFO",
        id="journald-short-russian+vllm",
    ),
    pytest.param(
        # tests/fixtures/logs/sglang_docker_compose_eagle_capture.log (sglang #8186)
        "llm0-1  | [2025-07-19 23:29:33] Load weight end. type=Gemma3ForConditionalGeneration, "
        "dtype=torch.bfloat16, avail mem=21.49 GB, mem usage=17.51 GB.",
        "Load weight end. type=Gemma3ForConditionalGeneration, dtype=torch.bfloat16, avail mem=21.49 GB, "
        "mem usage=17.51 GB.",
        "", "",
        id="compose+sglang",
    ),
    pytest.param(
        # compose service name from sglang #11218 around the PR #17392 line
        "deepseek-v32-exp  | [2026-05-07 05:56:32 DP3 TP3 EP3] Capture cuda graph begin. This can take up to "
        "several minutes. avail mem=13.95 GB",
        "Capture cuda graph begin. This can take up to several minutes. avail mem=13.95 GB", "DP3 TP3 EP3", "",
        id="compose+sglang-dp-ranks",
    ),
    pytest.param(
        # tests/fixtures/logs/vllm_v064_compose_no_cache_blocks.log (vllm #10439), V0 format without brackets
        "vllm-1  | INFO 11-18 18:07:17 api_server.py:175] Multiprocessing frontend to use "
        "ipc:///tmp/b0076790-edae-427c-8435-140c057908d8 for IPC Path.",
        "Multiprocessing frontend to use ipc:///tmp/b0076790-edae-427c-8435-140c057908d8 for IPC Path.", "", "INFO",
        id="compose+vllm-v0",
    ),
    pytest.param(
        # sglang #23602
        "[2026-06-02 08:00:20 TP0 EP0] Scheduler hit an exception: Traceback (most recent call last):",
        "Scheduler hit an exception: Traceback (most recent call last):", "TP0 EP0", "",
        id="sglang-ranks",
    ),
    pytest.param(
        # sglang #2468: uvicorn line, reformatted by SGLang
        "[2024-12-13 01:45:02] INFO:     Started server process [3831493]",
        "INFO:     Started server process [3831493]", "", "INFO",
        id="sglang-uvicorn",
    ),
    pytest.param(
        # sglang #1479: 2024 time-only prefix
        "[23:17:01 TP7] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.48 GB",
        "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.48 GB", "TP7", "",
        id="sglang-time-only",
    ),
    pytest.param(
        # vllm PR #29335
        "(EngineCore_DP0 pid=441) INFO 11-24 11:43:54 [gpu_model_runner.py:3341] Model loading took 2.0513 GiB "
        "memory and 27.200487 seconds",
        "Model loading took 2.0513 GiB memory and 27.200487 seconds", "EngineCore_DP0", "INFO",
        id="vllm-process-tag",
    ),
    pytest.param(
        # per the released wheels: ~0.7-0.9, no process tag
        "INFO 06-22 02:55:02 [core.py:172] Waiting for init message from front-end.",
        "Waiting for init message from front-end.", "", "INFO",
        id="vllm-no-tag",
    ),
    pytest.param(
        # per the released wheels: before that, no brackets
        "INFO 09-13 22:25:38 model_runner.py:1008] Capturing the model for CUDA graphs.",
        "Capturing the model for CUDA graphs.", "", "INFO",
        id="vllm-no-brackets",
    ),
    pytest.param(
        # tests/fixtures/logs/vllm_v010_free_memory_engine_failed.log (QinYang79/ICL#3)
        "(VllmWorker rank=0 pid=3926141) ERROR 08-12 01:36:10 [multiproc_executor.py:511] ValueError: Free "
        "memory on device (16.61/23.68 GiB) on startup is less than desired GPU memory utilization",
        "ValueError: Free memory on device (16.61/23.68 GiB) on startup is less than desired GPU memory utilization",
        "VllmWorker rank=0", "ERROR",
        id="vllm-worker-error",
    ),
    pytest.param(
        # sglang #2193's line as pasted without its leading `[` (the shape the brief's real logs have)
        "2024-11-26 14:25:58] Initialization failed. warmup error: Traceback (most recent call last):",
        "Initialization failed. warmup error: Traceback (most recent call last):", "", "",
        id="sglang-lost-bracket",
    ),
    pytest.param(
        "2025-01-02 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "Scheduler hit an exception: Traceback (most recent call last):", "TP0", "",
        id="sglang-lost-bracket-ranks",
    ),
    pytest.param(
        # tests/fixtures/logs/sglang_v02_gpu_id_prefix_uvicorn.log (sglang #744): SGLang 0.2's prefix
        "[gpu_id=1] Memory pool end. avail mem=6.46 GB",
        "Memory pool end. avail mem=6.46 GB", "TP1", "",
        id="sglang-0.2-gpu-id",
    ),
    pytest.param(
        # tests/fixtures/logs/sglang_diffusion_warmup_failed_then_shutdown.log (sglang #28493): month-day only
        "[06-17 13:46:56] Server warmup failed; aborting startup",
        "Server warmup failed; aborting startup", "", "",
        id="sglang-month-day",
    ),
    pytest.param(
        # tests/fixtures/logs/vllm_compile_enginecore_failed_ci.log (pytorch #170570): a CI runner's stamp
        "[2025-12-15T20:35:11Z] (EngineCore_DP0 pid=3112) ERROR 12-15 12:35:11 [core.py:866] EngineCore failed "
        "to start.",
        "EngineCore failed to start.", "EngineCore_DP0", "ERROR",
        id="ci-stamp+vllm",
    ),
    pytest.param(
        # `docker logs --timestamps` (microsoft/graphrag #1400)
        '2024-11-12T10:17:51.514303464Z INFO:     172.19.0.61:52538 - "POST /v1/chat/completions HTTP/1.1" 500 '
        "Internal Server Error",
        'INFO:     172.19.0.61:52538 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error', "", "INFO",
        id="docker-timestamps+uvicorn",
    ),
    pytest.param(
        # vllm #30905: a worker under the engine core carries both process tags
        "(EngineCore_DP0 pid=26353) (Worker_TP7 pid=26373) ERROR 12-17 13:32:44 [multiproc_executor.py:815]   "
        'File "/usr/local/lib/python3.12/dist-packages/vllm/compilation/cuda_graph.py", line 126, in __call__',
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/compilation/cuda_graph.py", line 126, in __call__',
        "Worker_TP7", "ERROR",
        id="vllm-two-process-tags",
    ),
    pytest.param(
        # tests/fixtures/logs/vllm_shutdown_sigint.log (vllm PR #43707): the terminal's `^C` before the line
        "^C(EngineCore pid=3946143) INFO 05-26 19:19:56 [core.py:1155] [shutdown] EngineCore: trigger received "
        "signal=SIGINT",
        "[shutdown] EngineCore: trigger received signal=SIGINT", "EngineCore", "INFO",
        id="ctrl-c-echo+vllm",
    ),
]


@pytest.mark.parametrize(("raw", "text", "ranks", "level"), PREFIX_CASES)
def test_clean_strips_prefixes(raw: str, text: str, ranks: str, level: str) -> None:
    c = clean(raw)
    assert c.text == text
    assert c.prefixed
    assert c.ranks == ranks
    assert c.level == level


def test_clean_names_the_journald_identifier() -> None:
    # tests/fixtures/logs/vllm_journald_bash_systemd_exit.log (vllm #12474): systemd's own line, and the server's
    # output through a shell script (`bash[PID]`)
    c = clean("Jan 28 10:40:08 localhost systemd[1]: vllm3.service: Main process exited, code=exited, "
              "status=1/FAILURE")
    assert (c.ident, c.text) == ("systemd", "vllm3.service: Main process exited, code=exited, status=1/FAILURE")
    c = clean("Jan 28 10:40:07 localhost bash[367371]:     raise RuntimeError(")
    assert (c.ident, c.text, c.prefixed) == ("bash", "    raise RuntimeError(", False)
    assert clean("[2024-12-13 01:45:02] INFO:     Started server process [3831493]").ident == ""


def test_a_date_without_its_bracket_is_not_taken_for_a_prefix_without_its_close() -> None:
    c = clean("2024-12-13 01:45:02 a line that happens to start with a date")
    assert not c.prefixed and c.text.startswith("2024-12-13")


def test_clean_keeps_server_prefix_in_body_but_drops_outer_wrappers() -> None:
    # the K2.6 DFlash deployment
    c = clean("May 29 17:01:02 dflash-train python[106324]: [2026-05-29 17:01:02 TP0 EP0] Load weight end.")
    assert c.body == "[2026-05-29 17:01:02 TP0 EP0] Load weight end."
    c = clean("llm0-1  | [2025-07-19 23:29:33] Load weight end.")  # sglang #8186
    assert c.body == "[2025-07-19 23:29:33] Load weight end."


def test_clean_timestamps() -> None:
    c = clean("[2026-06-02 08:00:20 TP0 EP0] Scheduler hit an exception: boom")  # sglang #23602
    assert c.ts == datetime(2026, 6, 2, 8, 0, 20).timestamp()
    c = clean("[2026-06-02 08:00:20.250 TP0] Load weight begin. avail mem=95.12 GB")  # SGLANG_LOG_MS=1
    assert c.ts == pytest.approx(datetime(2026, 6, 2, 8, 0, 20).timestamp() + 0.25)
    # vLLM has no year: ref_year dates it
    c = clean("(EngineCore_DP0 pid=441) INFO 11-24 11:43:54 [gpu_model_runner.py:3341] Model loading took 2 GiB",
              ref_year=2025)
    assert c.ts == datetime(2025, 11, 24, 11, 43, 54).timestamp()
    # journald short format wins over the inner prefix, dated with ref_year
    c = clean("May 29 17:01:02 dflash-train python[106324]: [2026-05-29 17:01:09 TP0 EP0] x", ref_year=2026)
    assert c.ts == datetime(2026, 5, 29, 17, 1, 2).timestamp()


def test_unprefixed_lines_are_not_prefixed() -> None:
    # traceback lines (tests/fixtures/logs/sglang_capture_failed_illegal_memory.log) keep their text as is
    frame = ('  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 267, '
             "in __init__")
    c = clean(frame)
    assert not c.prefixed
    assert c.text == frame
    c = clean("Exception: Capture cuda graph failed: RuntimeError: CUDA error: an illegal memory access was "
              "encountered")
    assert not c.prefixed
    assert c.text.startswith("Exception: Capture cuda graph failed")


# ------------------------------------------------------------------------------------------------ escapes


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x1b[31mERROR\x1b[0m boom", "ERROR boom"),
        ("\x1b]0;pwned title\x07after", "after"),
        ("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1b[2J\x1b[Hclear", "clear"),
        ("bell\x07 back\x08space nul\x00", "bell backspace nul"),
        ("tab\tkept", "tab\tkept"),
    ],
)
def test_sanitize_removes_escape_codes(raw: str, expected: str) -> None:
    assert sanitize(raw) == expected


def test_escape_codes_do_not_defeat_prefix_detection() -> None:
    # VLLM_LOGGING_COLOR=1 colours the level
    c = clean("\x1b[32mINFO\x1b[0m 06-22 02:55:02 [core.py:172] Waiting for init message from front-end.")
    assert c.prefixed
    assert c.text == "Waiting for init message from front-end."
    assert "\x1b" not in c.body


def test_markup_is_kept_literally() -> None:
    # log text is data: Rich markup is neither interpreted nor stripped here
    c = clean("[2026-06-02 08:00:20 TP0] weird [bold]text[/] and [red]")
    assert c.text == "weird [bold]text[/] and [red]"


def test_overlong_line_is_cut() -> None:
    c = clean("[2026-06-02 08:00:20 TP0] " + "x" * (MAX_LINE * 4))
    assert len(c.body) <= MAX_LINE + 16
    assert c.body.endswith("[cut]")


# ------------------------------------------------------------------------------------------------ splitting


def test_split_output_on_newlines_and_carriage_returns() -> None:
    # tqdm redraws with \r on a TTY (the released wheels/2)
    chunk = ("Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]\r"
             "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.11it/s]\r\n"
             "[2026-06-02 08:00:20 TP0] Load weight end.\n\n\r")
    assert split_output(chunk) == [
        "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
        "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.11it/s]",
        "[2026-06-02 08:00:20 TP0] Load weight end.",
    ]


def test_line_splitter_splits_on_cr_and_lf() -> None:
    sp = LineSplitter()
    assert sp.feed(b"a\rb\r\nc\n") == ["a", "b", "c"]
    assert sp.feed(b"partial") == []
    assert sp.feed(b" line\rnext") == ["partial line"]
    assert sp.flush() == ["next"]
    assert sp.flush() == []


def test_line_splitter_utf8_split_across_chunks_and_invalid_bytes() -> None:
    sp = LineSplitter()
    euro = "€".encode()
    assert sp.feed(euro[:1]) == []
    assert sp.feed(euro[1:] + b" ok\n") == ["€ ok"]
    assert sp.feed(b"bad \xff\xfe byte\n") == ["bad \ufffd\ufffd byte"]


def test_line_splitter_cuts_a_partial_line_that_never_ends() -> None:
    sp = LineSplitter(max_line=100)
    out: list[str] = []
    for _ in range(50):
        out += sp.feed(b"y" * 64)
    assert out, "an endless line must be cut, not buffered forever"
    assert all(len(x) <= 100 for x in out)


def test_line_splitter_max_line_applies_to_complete_lines() -> None:
    # regression: a complete overlong line arriving in one chunk used to be returned whole
    sp = LineSplitter(max_line=10)
    out = sp.feed(b"x" * 25 + b"\n")
    assert all(len(x) <= 10 for x in out), out


def test_line_splitter_overlong_line_is_cut_or_split_without_loss() -> None:
    # regression: the remainder of an overlong line used to come out as further "lines", with characters lost
    sp = LineSplitter(max_line=10)
    out = sp.feed(b"a" * 8) + sp.feed(b"a" * 8) + sp.feed(b"a" * 8 + b"\n") + sp.flush()
    assert out == ["a" * 10] or "".join(out) == "a" * 24, out


# ------------------------------------------------------------------------------------------------ hypothesis

_any_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=300)
_prefixish = st.sampled_from([
    "", "May 29 17:01:02 host python[1]: ", "2026-05-29T17:01:02+0000 h x[2]: ", "svc-1  | ",
    "[2026-06-02 08:00:20 TP0 EP0] ", "[23:17:01 TP7] ", "(EngineCore_DP0 pid=441) INFO 11-24 11:43:54 [a.py:1] ",
    "INFO 09-13 22:25:38 model_runner.py:1008] ", "\x1b[32mINFO\x1b[0m ", "(APIServer pid=1) INFO:     ",
    "Feb 30 25:61:99 h p[9]: ", "[2026-13-45 99:99:99 TP0] ", "(x pid=1) INFO 13-45 99:99:99 [b.py:2] ",
])


@settings(max_examples=300, deadline=None)
@given(prefix=_prefixish, body=_any_text, ref_year=st.integers(min_value=1, max_value=9999))
def test_clean_never_raises(prefix: str, body: str, ref_year: int) -> None:
    c = clean(prefix + body, ref_year=ref_year)
    assert isinstance(c.text, str)
    assert "\x1b" not in c.text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", c.text)


@settings(max_examples=10, deadline=None)
@given(st.integers(min_value=MAX_LINE, max_value=5 * MAX_LINE), st.sampled_from(["x", "\x1b[1m", "é", "\r"]))
def test_clean_huge_lines(n: int, piece: str) -> None:
    c = clean(piece * n)
    assert len(c.text) <= MAX_LINE + 16


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_line_splitter_never_raises_on_bytes(data: bytes) -> None:
    sp = LineSplitter(max_line=64)
    out = sp.feed(data) + sp.flush()
    assert all(isinstance(x, str) and "\n" not in x and "\r" not in x for x in out)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


def _split_all(data: bytes, chunks: list[bytes], max_line: int = 65_536) -> tuple[list[str], list[str]]:
    whole = LineSplitter(max_line)
    at_once = whole.feed(data) + whole.flush()
    sp = LineSplitter(max_line)
    pieces: list[str] = []
    for c in chunks:
        pieces += sp.feed(c)
    pieces += sp.flush()
    return at_once, pieces


_line = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_line, max_size=20), seps=st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=20,
                                                         max_size=20),
       cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=15))
def test_line_splitter_reassembles_lines_across_chunk_boundaries(lines: list[str], seps: list[str],
                                                                  cuts: list[int]) -> None:
    text = "".join(line + sep for line, sep in zip(lines, seps, strict=False))
    data = text.encode()
    at_once, pieces = _split_all(data, _chunks(data, cuts))
    assert pieces == at_once
    assert at_once == [p for p in re.split(r"\r\n|\r|\n", text) if p]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=15))
def test_line_splitter_chunking_of_arbitrary_bytes_does_not_change_lines(data: bytes, cuts: list[int]) -> None:
    at_once, pieces = _split_all(data, _chunks(data, cuts))
    assert pieces == at_once


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(_line, st.builds(lambda c, n: c * n, st.sampled_from(["a", "é", "€"]),
                                                 st.integers(0, 60))), max_size=12),
       seps=st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=12, max_size=12),
       cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=15),
       max_line=st.integers(min_value=1, max_value=24))
def test_line_splitter_overlong_lines_are_cut_the_same_however_chunked(lines: list[str], seps: list[str],
                                                                       cuts: list[int], max_line: int) -> None:
    text = "".join(line + sep for line, sep in zip(lines, seps, strict=False))
    data = text.encode()
    at_once, pieces = _split_all(data, _chunks(data, cuts), max_line)
    assert pieces == at_once
    assert at_once == [p[:max_line] for p in re.split(r"\r\n|\r|\n", text) if p]


# ------------------------------------------------------------------------------------------------ error lines


@pytest.mark.parametrize(("raw", "error"), [
    ("(EngineCore_DP0 pid=1) ERROR 09-28 15:47:24 [core.py:718] EngineCore failed to start.", True),
    ("[2026-06-02 08:00:20 TP0 EP0] ERROR:    Exception in ASGI application", True),
    ("Traceback (most recent call last):", True),
    ('  File "/usr/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 2890, in run', True),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", True),
    ("KeyboardInterrupt", True),
    ("May 29 17:01:02 host python[123]:     self.init_memory_pool(min_mem)", True),
    # the server's own prefixed lines are errors by their level only, whatever they say
    ("[2026-06-02 08:00:20 TP0 EP0] Scheduler hit an exception: Traceback (most recent call last):", False),
    ("(EngineCore_DP0 pid=1) WARNING 09-28 15:47:24 [core.py:718] slow", False),
    ("[2026-04-05 20:02:51] Decode batch, #running-req: 32, #token: 11179", False),
    ("Loading safetensors checkpoint shards:  50% Completed | 2/4", False),
    ("   ", False),
])
def test_one_definition_of_an_error_line(raw: str, error: bool) -> None:
    assert is_error_line(clean(raw)) is error


def test_warning_lines_are_what_the_errors_view_adds() -> None:
    assert is_warning_line(clean("(EngineCore_DP0 pid=1) WARNING 09-28 15:47:24 [core.py:718] slow"))
    assert is_warning_line(clean("[2026-06-02 08:00:20 TP0 EP0] Subprocess scheduler_0 (pid=12) crashed"))
    assert not is_warning_line(clean("[2026-04-05 20:02:51] Decode batch, #running-req: 32"))
    # a bare frame continues an open block; the next prefixed line (or a blank one) ends it
    assert continues_block(clean('  File "x.py", line 1, in f'))
    assert not continues_block(clean("[2026-04-05 20:02:51] Decode batch, #running-req: 32"))
    assert not continues_block(clean("  "))
