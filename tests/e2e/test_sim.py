"""The reference server (tui/sim) as real processes on loopback: the product's tests lean on it behaving like
SGLang, so its phases, HTTP states, failure scenarios and GPU memory accounting are checked here."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.sim_process import Sim
from tests.helpers.wait import slack, until
from tui.sim import gpus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[Callable[..., Sim]]:
    started: list[Sim] = []

    def start(*args: str, scale: float = 0.05) -> Sim:
        s = Sim(tmp_path, *args, scale=scale)
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()


def smi(state: Path, *args: str, n: int = 8) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", str(state), "--sim-gpus", str(n), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=slack(10))


def used(state: Path, n: int = 8) -> list[int]:
    out = smi(state, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits", n=n).stdout
    return [int(line.split(", ")[1]) for line in out.splitlines()]


def assert_order(text: str, markers: list[str]) -> None:
    pos = [text.find(m) for m in markers]
    assert all(p >= 0 for p in pos) and pos == sorted(pos), list(zip(markers, pos, strict=True))


#: what each release prints where they differ (read in its wheel: tui/sim/releases.py names the files)
RELEASE_LINES = {
    "0.5.15": ["server_args=ServerArgs(model_path='moonshotai/Kimi-K2.6', ", "TP0] Init torch distributed begin.",
               "TP1] Init torch distributed ends. elapsed=", "TP0] Load weight begin. avail mem=139.28 GB",
               "TP1] Load weight end. elapsed=", "KV Cache is allocated. dtype: torch.bfloat16, #tokens: ",
               "Memory pool end. avail mem=", "Capture target decode CUDA graph begin. backend=full, "
               "num_tokens_per_bs=1, bs=[1, 2, 4, 8, 16,", "Capture target decode CUDA graph end. elapsed="],
    "0.5.18": ["server_args=ServerArgs(model_path='moonshotai/Kimi-K2.6', ", "TP0] Init torch distributed begin.",
               "TP1] Init torch distributed ends. elapsed=", "TP0] Load weight begin. avail mem=139.28 GB",
               "TP1] Load weight end. elapsed=", "KV Cache is allocated. dtype: torch.bfloat16, #tokens: ",
               "Memory pool end. avail mem=", "Capture target decode CUDA graph begin. backend=full, "
               "num_tokens_per_req=1, bs=[1, 2, 4, 8, 16,", "Capture target decode CUDA graph end. elapsed="],
    "0.5.23": ["server_args={'model_path': 'moonshotai/Kimi-K2.6', ", "TP0] Init parallel begin.",
               "TP1] Init parallel ends. elapsed=", "TP1] Memory baseline taken. mem usage=0.53 GB",
               "TP0] Load weight begin. avail mem=139.28 GB",
               "TP1] Load weight end. elapsed=", "KV Cache is allocated. dtype: torch.bfloat16, #tokens: ",
               "Memory pool end. avail mem=", "Capture target decode CUDA graph begin. backend=full, "
               "num_tokens_per_req=1, avail mem=", "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16,"],
}


@pytest.mark.parametrize("release", list(RELEASE_LINES))
def test_phases_with_graphs_and_sigterm(sims: Any, release: str) -> None:
    s = sims(*(("--release", release) if release != "0.5.23" else ()))  # 0.5.23: the default, the newest
    s.wait_for("The server is fired up and ready to roll!")
    assert_order(s.out, [*RELEASE_LINES[release],
                         "TP0] max_total_num_tokens=", "INFO:     Started server process",
                         "Uvicorn running on http://127.0.0.1:", '"GET /model_info HTTP/1.1" 200 OK',
                         '"POST /generate HTTP/1.1" 200 OK', "fired up and ready to roll"])
    assert s.http("/metrics")[0] == 404
    assert s.term() == 0
    bars = s.err.replace("\n", "\r").split("\r")
    assert any(b.startswith("Loading safetensors checkpoint shards:  50% Completed | 32/64 [") for b in bars)
    assert "Loading safetensors checkpoint shards: 100% Completed | 64/64" in s.err.split("\n")[0]
    assert any(b.startswith("Capturing batches (bs=256 avail_mem=") for b in bars)
    assert "INFO:     Finished server process" in s.out


def test_no_graphs_speculative_load_and_metrics_agree(sims: Any) -> None:
    s = sims("--disable-cuda-graph", "--speculative-algorithm", "EAGLE3", "--sim-load", "4", "--enable-metrics")
    s.wait_for("fired up")
    assert "Capture" not in s.out and s.out.count("TP0] Load weight end.") == 2
    s.wait_for("accept len: ")
    n = len([x for x in s.lines if "Decode batch" in x])
    until("two decode lines more", lambda: len([x for x in s.lines if "Decode batch" in x]) >= n + 2)
    code, body = s.http("/metrics")
    text = body.decode()
    assert code == 200 and "# TYPE sglang:gen_throughput gauge" in text and "sglang:spec_accept_length{" in text
    gauge = float(next(x for x in text.splitlines() if x.startswith("sglang:gen_throughput{")).split()[-1])
    decode_total = [x for x in text.splitlines() if 'mode="decode"' in x]

    def printed_throughputs() -> list[float]:
        return [float(x.split("gen throughput (token/s): ")[1].split(",")[0]) for x in s.lines if "Decode b" in x]

    # the gauge may be set a moment before its decode line is printed
    printed = until(lambda: f"the gauge's {gauge} in a decode line", lambda: gauge in printed_throughputs()
                    and printed_throughputs(), 5, every=0.02)
    assert gauge in printed and 38 * 3 < gauge < 38 * 4 * 2.6 * 0.75 * 1.3, (gauge, printed)
    last = [x for x in s.lines if "Decode batch" in x][-1]
    kv = dict(f.rsplit(": ", 1) for f in last.split("] ", 1)[1].split(", ")[1:])
    assert int(kv["#running-req"]) + int(kv["#queue-req"]) == 4 and kv["cuda graph"] == "False", kv
    info = json.loads(s.http("/server_info")[1])
    assert info["version"] == "0.5.23" and info["internal_states"][0]["avg_spec_accept_length"] > 2

    def decode_count(metrics: list[str]) -> float:
        return float(metrics[0].split()[-1])

    def later() -> list[str]:
        return [x for x in s.http("/metrics")[1].decode().splitlines() if 'mode="decode"' in x]

    until("the decode counter to grow while the load runs", lambda: decode_count(later()) > decode_count(decode_total),
          5)


def test_http_states_models_streaming(sims: Any) -> None:
    s = sims("--enable-metrics", scale=0.15)
    s.wait_for("Load weight begin")
    with pytest.raises(urllib.error.URLError) as exc:
        s.http("/health")
    assert isinstance(exc.value.reason, ConnectionRefusedError)
    s.wait_for("Uvicorn running on")
    assert s.http("/health")[0] == 503
    s.wait_for("fired up")
    assert s.http("/health")[0] == 200 and s.http("/health_generate")[0] == 200
    models = json.loads(s.http("/v1/models")[1])
    assert models["object"] == "list" and models["data"][0]["id"] == "moonshotai/Kimi-K2.6"
    assert models["data"][0]["owned_by"] == "sglang" and models["data"][0]["max_model_len"] == 262144
    assert "sglang:gen_throughput{engine_type=" in s.http("/metrics")[1].decode()  # labels in name order
    code, body = s.http("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 12, "stream": True})
    events = [e[len("data: "):] for e in body.decode().split("\n\n") if e]
    assert code == 200 and events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and len(chunks) >= 3
    assert chunks[-1]["usage"]["completion_tokens"] == 12 and chunks[-1]["choices"][0]["finish_reason"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert len(text.split()) == 12
    gen = json.loads(s.http("/generate", {"text": "abc", "sampling_params": {"max_new_tokens": 5}})[1])
    assert gen["meta_info"]["completion_tokens"] == 5 and len(gen["text"].split()) == 5
    assert s.http("/v1/completions", raw=b"{not json")[0] == 400
    assert s.http("/nope")[0] == 404


def test_dflash_with_graphs_crashes_at_first_replay(sims: Any, tmp_path: Path) -> None:
    s = sims("--scenario", "dflash-graph-crash")
    assert s.finish() == -signal.SIGKILL
    assert_order(s.out, ["Load weight end", "Initialized DFLASH draft runner.", "Capture target verify CUDA "
                         "graph begin. backend=full, num_tokens_per_req=8", "Capture draft decode CUDA graph end",
                         "Uvicorn running", "TP0] Scheduler hit an exception: Traceback (most recent call last):",
                         "sglang/srt/model_executor/cuda_graph_runner.py", "in replay",
                         "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
                         "CUDA kernel errors might be asynchronously reported", "Received sigquit from a child",
                         "kill_process_tree called: parent_pid="])
    assert "fired up" not in s.out
    holder = json.loads((tmp_path / "holders" / f"{s.proc.pid}.json").read_text())
    assert holder["exited"] is not None


def test_oom_on_fast_restart_then_ok_after_release(sims: Any, tmp_path: Path) -> None:
    args = ("--scenario", "oom-on-fast-restart", "--disable-cuda-graph", "--skip-server-warmup", "--tp", "8")
    # A's memory outlives it by 0.3-1 x 8 s x slack per GPU: B (a new Python process) must read it before the last
    # GPU is freed, and on a loaded 2-core machine 1.8 s (the 12 s default x 0.15) was once not enough
    a = sims(*args, "--sim-release-delay", f"{slack(8.0) / 0.15:g}", scale=0.15)
    a.wait_for("fired up")
    assert a.term() == 0
    b = sims(*args, scale=0.1)
    assert b.finish() == -signal.SIGKILL
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in b.out
    assert f"Process {a.proc.pid} has" in b.out and "Received sigquit from a child process" in b.out
    until("every GPU released", lambda: not any(used(tmp_path)), 12)
    c = sims(*args, scale=0.1)
    c.wait_for("fired up")
    assert "OutOfMemoryError" not in c.out


def test_stale_health_answers_models_after_sigterm(sims: Any) -> None:
    s = sims("--scenario", "stale-health", "--disable-cuda-graph", "--skip-server-warmup", scale=0.1)
    s.wait_for("fired up")
    s.proc.send_signal(signal.SIGTERM)
    s.wait_for("SIGTERM received.")
    n = len(s.lines)
    assert s.http("/v1/models")[0] == 200 and s.http("/health")[0] == 200
    assert s.http("/generate", {"text": "x"})[0] == 503
    assert s.proc.poll() is None
    assert s.finish() == 0 and len(s.lines) == n


def test_crash_while_serving_and_hang_loading(sims: Any, tmp_path: Path) -> None:
    c = sims("--scenario", "crash-while-serving", "--disable-cuda-graph", "--skip-server-warmup")
    c.wait_for("fired up")
    assert c.http("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2}})[0] == 200  # it served
    assert c.finish() == -signal.SIGKILL
    assert "Subprocess scheduler_3 (pid=" in c.out and "SIGQUIT received. signum=3, frame=None." in c.out
    h = sims("--scenario", "hang-loading", "--sim-gpu-ids", "4,5")
    h.wait_for("Load weight begin")
    time.sleep(0.4)
    first, n = used(tmp_path), len(h.lines)
    time.sleep(0.6)
    assert used(tmp_path) == first and first[4] > 0 and len(h.lines) == n and h.proc.poll() is None
    assert h.term() == 0


def test_nvidia_smi_reflects_hold_and_release(sims: Any, tmp_path: Path) -> None:
    s = sims("--sim-gpus", "4", "--sim-gpu-ids", "1,2", "--disable-cuda-graph", "--skip-server-warmup",
             "--sim-release-delay", "20")
    s.wait_for("fired up")
    fields = "index,uuid,name,memory.used,memory.total,memory.free,utilization.gpu,temperature.gpu,power.draw"
    rows = [r.split(", ") for r in smi(tmp_path, f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                                       n=4).stdout.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3] and all(r[2] == "NVIDIA H200" for r in rows)
    assert all(r[1].startswith("GPU-") and len(r[1]) == 40 and r[4] == "143771" for r in rows)
    mem = [int(r[3]) for r in rows]
    assert mem[0] == mem[3] == 0 and mem[1] == mem[2] > 100_000
    assert int(rows[1][5]) == gpus.CAPACITY_MIB - mem[1] and float(rows[1][8]) >= 100
    head = smi(tmp_path, "--query-gpu=index,memory.used,utilization.gpu,power.draw", "--format=csv", n=4).stdout
    assert head.splitlines()[0] == "index, memory.used [MiB], utilization.gpu [%], power.draw [W]"
    assert head.splitlines()[2].split(", ")[1].endswith(" MiB")
    apps = smi(tmp_path, "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
               "--format=csv,noheader,nounits", n=4).stdout.splitlines()
    assert [a.split(", ")[:2] for a in apps] == [[str(s.proc.pid), "python3"]] * 2
    loop = subprocess.Popen([sys.executable, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", str(tmp_path),
                             "--sim-gpus", "4", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits",
                             "-lms", "50"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert s.term() == 0
        samples: list[list[int]] = []
        assert loop.stdout
        while not samples or any(samples[-1]):
            sample = [int(loop.stdout.readline().split(", ")[1]) for _ in range(4)]
            samples.append(sample)
            assert len(samples) < 200
        pairs = itertools.pairwise(samples)
        assert samples[0][1] > 0 and all(a >= b for x, y in pairs for a, b in zip(x, y, strict=True))
    finally:
        loop.kill()
        loop.wait()
    assert smi(tmp_path, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").stdout == ""
    bad = smi(tmp_path, "--query-gpu=index,bogus.field", "--format=csv")
    assert bad.returncode == 2 and 'Field "bogus.field" is not a valid field to query.' in bad.stdout


def test_release_is_staggered_per_gpu(tmp_path: Path) -> None:
    pid = subprocess.Popen([sys.executable, "-c", "pass"])  # a pid that is surely dead
    pid.wait()
    (tmp_path / "holders").mkdir()
    t0 = 1000.0
    holder = {"pid": pid.pid, "name": "python3", "gpus": {str(g): 1000 for g in range(8)}, "util": 50,
              "started": 0, "updated": t0, "exited": t0, "release_delay": 10.0}
    (tmp_path / "holders" / f"{pid.pid}.json").write_text(json.dumps(holder))
    held = [sum(g["memory_used"] > 0 for g in gpus.read_state(str(tmp_path), t0 + dt, 8)[0])
            for dt in (2.9, 4, 6, 8, 10.01)]
    assert held[0] == 8 and held[-1] == 0 and held == sorted(held, reverse=True)
    rows, procs = gpus.read_state(str(tmp_path), t0 + 5, 8)
    assert {p["gpu"] for p in procs} == {g["index"] for g in rows if g["memory_used"]}
    assert all(not p["alive"] for p in procs) and all(g["util"] == 0 for g in rows)


def test_runs_when_copied_alone(tmp_path: Path) -> None:
    d = tmp_path / "simdir"
    d.mkdir()
    for name in ("server.py", "args.py", "http_api.py", "gpus.py", "nvidia_smi.py", "scenarios.py", "nodes.py",
                 "releases.py"):
        shutil.copy(ROOT / "tui" / "sim" / name, d / name)
    env = {**os.environ, "BRINGUP_SIM_STATE": str(tmp_path / "st")}
    out = subprocess.run(["python3", str(d / "nvidia_smi.py"), "-L"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.startswith("GPU 0: NVIDIA H200 (UUID: GPU-")
    out = subprocess.run(["python3", str(d / "server.py"), "--scenario", "nope"], capture_output=True, text=True)
    assert out.returncode == 2 and "invalid choice: 'nope'" in out.stderr


# ------------------------------------------------------------------------------------------------ --release


def test_each_release_parses_its_own_flags(sims: Any) -> None:
    """0.5.20 took out `--cuda-graph-max-bs` (on 0.5.23 argparse finds it an ambiguous prefix, as SGLang's own parser
    does), and `tc_piecewise` is gone by 0.5.23; 0.5.15 and 0.5.18 take the old spelling with SGLang's warning,
    unstamped (logging is not set up yet when they parse), where 0.5.23's is stamped (set up at import)."""
    def parse(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tui.sim", *args, "--help"], cwd=ROOT, capture_output=True,
                              text=True, timeout=slack(30))
    bad = parse("--cuda-graph-max-bs", "64")
    assert bad.returncode == 2 and ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                                    "--cuda-graph-max-bs-prefill") in bad.stderr, bad.stderr
    assert parse("--cuda-graph-backend-decode", "tc_piecewise").returncode == 2
    assert parse("--release", "0.5.18", "--cuda-graph-backend-decode", "tc_piecewise").returncode == 0
    assert parse("--release", "0.5.10").returncode == 2  # not imitated

    old = sims("--release", "0.5.18", "--cuda-graph-max-bs", "64", "--skip-server-warmup")
    old.wait_for("fired up")
    assert "cuda_graph_max_bs_decode=64, " in old.lines[0] and "max_running_requests=64," in old.out
    assert "bs=[1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64], avail mem=" in old.out
    assert old.term() == 0
    assert old.err.startswith("\x1b[1;33m'--cuda-graph-max-bs' is deprecated and will be removed in a future "
                              "release. Use '--cuda-graph-max-bs-decode' instead.\x1b[0m\n"), old.err[:300]
    new = sims("--disable-cuda-graph", "--skip-server-warmup")
    new.wait_for("fired up")
    assert "'disable_cuda_graph': True" in new.lines[0] and "Capture" not in new.out
    assert new.term() == 0
    first = new.err.split("\n")[0]
    assert first[0] == "[" and first[20:] == ("] \x1b[1;33m'--disable-cuda-graph' is deprecated and will be removed "
                                              "in a future release. Use '--cuda-graph-backend-{decode,prefill}="
                                              "disabled' instead.\x1b[0m"), first


@pytest.mark.parametrize("release", ["0.5.15", "0.5.18", "0.5.23"])
def test_metrics_of_each_release_have_its_labels_and_count_a_request_when_it_finishes(sims: Any,
                                                                                      release: str) -> None:
    """The scheduler's figures carry its ranks; the tokenizer process's (requests, tokens, verify calls, TTFT) do not,
    and count a request when it finishes, `is_streaming` from 0.5.18; the verify counter by the request's own
    verify forwards (metrics_collector.py `observe_one_finished_request`), never every step."""
    from prometheus_client.parser import text_string_to_metric_families

    s = sims("--release", release, "--enable-metrics", "--disable-cuda-graph", "--skip-server-warmup",
             "--speculative-algorithm", "EAGLE")
    s.wait_for("fired up")
    assert s.http("/ready")[0] == (200 if release == "0.5.23" else 404)
    assert json.loads(s.http("/get_server_info")[1])["version"] == release
    s.wait_for("Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use "
               "'/server_info' instead.")

    def page() -> dict[str, list[Any]]:
        text = s.http("/metrics")[1].decode()
        return {f.name: f.samples for f in text_string_to_metric_families(text)}

    done: list[bytes] = []
    t = threading.Thread(target=lambda: done.append(s.http("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 120, "stream": True})[1]))
    t.start()
    until("decoding", lambda: any(x.labels.get("mode") == "decode" for x in page().get("sglang:realtime_tokens", [])),
          every=0.02)
    mid = page()  # decoding: the scheduler's counter moves every step, the tokenizer's wait for the finish
    assert "sglang:spec_verify_calls" not in mid and "sglang:generation_tokens" not in mid, sorted(mid)
    t.join(slack(30))
    assert done and done[0].endswith(b"data: [DONE]\n\n")
    end = page()
    ranks = {"engine_type", "model_name", "tp_rank", "pp_rank", "moe_ep_rank"}
    tok = {"engine_type", "model_name"} | ({"is_streaming"} if release != "0.5.15" else set())
    for name in ("sglang:gen_throughput", "sglang:num_running_reqs", "sglang:spec_accept_length"):
        assert {frozenset(x.labels) for x in end[name]} == {frozenset(ranks)}, name
    assert {frozenset(x.labels) for x in end["sglang:realtime_tokens"]} == {frozenset(ranks | {"mode"})}
    for name in ("sglang:prompt_tokens", "sglang:generation_tokens", "sglang:num_requests"):
        assert {frozenset(x.labels) for x in end[name]} == {frozenset(tok)}, name
    ttft = {frozenset(x.labels) for x in end["sglang:time_to_first_token_seconds"]}
    assert ttft == {frozenset(tok | {"le"}), frozenset(tok)}  # the buckets', and the count's and sum's
    [verify] = end["sglang:spec_verify_calls"]
    assert set(verify.labels) == {"engine_type", "model_name"}
    [gen] = [x for x in end["sglang:generation_tokens"] if x.name.endswith("_total")]
    assert gen.value == 120 and gen.labels.get("is_streaming", "true") == "true"
    assert 120 / 4 < verify.value < 120 / 1.5, verify.value  # the request's verify forwards, ~ tokens / accept length
