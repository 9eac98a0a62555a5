"""A real vLLM server watched by bringup, beside the same steps done by hand (issue 48, "One real server, at last").

Run on a GPU machine that has PyTorch but cannot fetch anything: `benchmarks/real_vllm.sh` puts vLLM and its
missing requirements together from carried pieces, then runs this with the carried packages on PYTHONPATH.

What it does, all on this machine's loopback:
1. makes a tiny Llama (random weights from a transformers config) and a byte-level BPE tokenizer trained here, so
   nothing comes from a hub;
2. by hand: `vllm serve` started, /health polled until 200, /version, /metrics and /v1/models read and one
   completion asked, SIGTERM, then the same with `--enforce-eager` added (the flag change);
3. through bringup: a `process` deployment with preset vllm: `start --no-wait`, `wait --json` (the phases as they
   were reached), `status --json`, /metrics and /version read, `restart --set enforce-eager --yes --json`,
   `status --json`, `stop --yes --json`;
4. writes every log, page and timing under $OUT (summary.json, plus one tarball of the rest).

Why by hand too: what bringup predicted (phases, ready, release) is judged against what the process itself printed
and answered, timed the same way.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/real_vllm_out"))
WORK = Path(os.environ.get("REAL_VLLM_WORK", "/tmp/real_vllm"))
REPO = Path(__file__).resolve().parent.parent
MODEL = WORK / "tiny-llama"
DEADLINE = time.monotonic() + float(os.environ.get("REAL_VLLM_BUDGET_S", "520"))
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.2f}] {msg}", flush=True)


def left() -> float:
    return DEADLINE - time.monotonic()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_model() -> None:
    """A 2-layer Llama of random bf16 weights and a BPE tokenizer trained on made-up text: nothing downloaded."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM

    MODEL.mkdir(parents=True, exist_ok=True)
    words = ["the", "server", "starts", "loads", "weights", "captures", "graphs", "and", "answers", "requests", "quickly", "while", "the", "console", "watches", "its", "phases", "memory", "and", "throughput", "on", "every", "gpu", "of", "the", "host"]
    corpus = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(400)]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.save(str(MODEL / "tokenizer.json"))
    (MODEL / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
        "model_max_length": 1024, "add_bos_token": False,
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:",
    }))
    (MODEL / "special_tokens_map.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>",
                                                                "pad_token": "<pad>"}))
    vocab = tok.get_vocab_size()
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
                      pad_token_id=tok.token_to_id("<pad>"), tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(str(MODEL), safe_serialization=True)
    (MODEL / "generation_config.json").write_text(json.dumps({"bos_token_id": cfg.bos_token_id,
                                                              "eos_token_id": cfg.eos_token_id}))
    log(f"model made: vocab {vocab}, files {sorted(p.name for p in MODEL.iterdir())}")


def env_for_server() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
               PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1")
    return env


def vllm_argv(port: int, extra: list[str]) -> list[str]:
    # the flash-attention kernels were left out of the carried wheel (343 MB): Triton's attention serves instead
    return [os.environ.get("REAL_VLLM_BIN", "vllm"), "serve", str(MODEL), "--served-model-name", "tiny",
            "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024", "--max-num-seqs", "8",
            "--gpu-memory-utilization", "0.25", "--attention-backend", "TRITON_ATTN", *extra]


def http(url: str, body: dict | None = None, timeout: float = 10.0) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception as e:
        return -1, repr(e)


def gpu_used_mib() -> int | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return int(out.split()[0])
    except Exception:
        return None


def by_hand(name: str, extra: list[str]) -> dict:
    """Start, poll /health until 200, read the pages, one completion, SIGTERM; every line timed as it came."""
    port = free_port()
    argv = vllm_argv(port, extra)
    res: dict = {"argv": argv, "port": port}
    logf = (WORK / f"{name}.log").open("w")
    timed = (WORK / f"{name}.timed.log").open("w")
    t_start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env_for_server(),
                            start_new_session=True)
    marks: dict[str, float] = {}

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            t = time.monotonic() - t_start
            logf.write(line)
            timed.write(f"{t:9.3f} {line}")
            for key in ("Loading weights took", "Model loading took", "torch.compile takes",
                        "Available KV cache memory", "Graph capturing finished", "init engine",
                        "Starting vLLM", "Application startup complete", "Shutting down",
                        "Cudagraph is disabled", "vLLM API server version", "Traceback", "Error"):
                if key in line and key not in marks:
                    marks[key] = round(t, 3)
        logf.flush()
        timed.flush()

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    base = f"http://127.0.0.1:{port}"
    health_first: dict[int, float] = {}
    while left() > 60:
        code, _ = http(base + "/health", timeout=2)
        if code not in health_first:
            health_first[code] = round(time.monotonic() - t_start, 3)
        if code == 200 or proc.poll() is not None:
            break
        time.sleep(0.25)
    res["health_first_seen_s"] = health_first
    res["ready"] = 200 in health_first
    if res["ready"]:
        for path in ("/version", "/v1/models", "/metrics", "/health", "/server_info", "/get_server_info"):
            code, text = http(base + path)
            (WORK / f"{name}{path.replace('/', '_')}.txt").write_text(text)
            res[f"GET {path}"] = code
        t = time.monotonic()
        code, text = http(base + "/v1/completions", {"model": "tiny", "prompt": "the server", "max_tokens": 4,
                                                     "temperature": 0})
        res["completion"] = {"code": code, "s": round(time.monotonic() - t, 3), "body": text[:600]}
        code, text = http(base + "/metrics")
        (WORK / f"{name}_metrics_after.txt").write_text(text)
        res["gpu_used_mib_serving"] = gpu_used_mib()
    t_stop = time.monotonic()
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        res["killed"] = True
    res["exit_code"] = proc.returncode
    res["stop_to_exit_s"] = round(time.monotonic() - t_stop, 3)
    th.join(timeout=5)
    # GPU memory back to where it was: polled, never a fixed sleep
    t = time.monotonic()
    while time.monotonic() - t < 30:
        used = gpu_used_mib()
        if used is not None and used < 2000:
            break
        time.sleep(0.2)
    res["gpu_used_mib_after_exit"] = gpu_used_mib()
    res["exit_to_released_s"] = round(time.monotonic() - t, 3)
    res["marks_s"] = marks
    logf.close()
    timed.close()
    log(f"{name}: ready={res['ready']} health={health_first} exit={res['exit_code']}")
    return res


def bringup(cfg: Path, *args: str, timeout: float) -> dict:
    argv = [sys.executable, "-m", "tui", "--config", str(cfg), *args]
    t = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=max(5.0, min(timeout, left())),
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
    res = {"argv": args, "rc": p.returncode, "s": round(time.monotonic() - t, 3), "stdout": p.stdout[-20000:],
           "stderr": p.stderr[-8000:]}
    log(f"bringup {' '.join(args)} -> rc {p.returncode} in {res['s']} s")
    return res


def write_config(cfg: Path, state: Path, port: int) -> None:
    """The bringup config of the run: one `process` deployment, preset vllm, the server's own environment."""
    env = {k: v for k, v in env_for_server().items() if k in (
        "PYTHONPATH", "PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK",
        "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "HOME", "LD_LIBRARY_PATH")}
    cfg.write_text("\n".join([
        f"state_dir = {json.dumps(str(state))}",
        "[deployments.tiny]",
        'manager = "process"',
        'preset = "vllm"',
        f'endpoint = "http://127.0.0.1:{port}"',
        "gpus = [0]",
        f"command = {json.dumps(vllm_argv(port, []))}",
        "env = {" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + "}",
        "",
    ]))


def through_bringup() -> dict:
    port = free_port()
    cfg = WORK / "bringup.toml"
    write_config(cfg, WORK / "bringup-state", port)
    res: dict = {"config": cfg.read_text()}
    steps = res["steps"] = []
    steps.append(bringup(cfg, "start", "tiny", "--no-wait", "--json", timeout=120))
    steps.append(bringup(cfg, "wait", "tiny", "--json", "--timeout", "300", timeout=320))
    steps.append(bringup(cfg, "status", "tiny", "--json", timeout=60))
    base = f"http://127.0.0.1:{port}"
    for path in ("/version", "/metrics", "/health"):
        code, text = http(base + path)
        (WORK / f"bringup_run{path.replace('/', '_')}.txt").write_text(text)
        res[f"GET {path}"] = code
    steps.append(bringup(cfg, "restart", "tiny", "--set", "enforce-eager", "--yes", "--json", timeout=300))
    steps.append(bringup(cfg, "status", "tiny", "--json", timeout=60))
    code, text = http(base + "/metrics")
    (WORK / "bringup_eager_metrics.txt").write_text(text)
    steps.append(bringup(cfg, "stop", "tiny", "--yes", "--json", timeout=120))
    steps.append(bringup(cfg, "status", "tiny", "--json", timeout=60))
    res["gpu_used_mib_after_stop"] = gpu_used_mib()
    return res


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    summary: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    try:
        t = time.monotonic()
        make_model()
        summary["model_s"] = round(time.monotonic() - t, 3)
        summary["gpu_used_mib_idle"] = gpu_used_mib()
        stages = os.environ.get("REAL_VLLM_STAGES", "hand,bringup").split(",")
        if "hand" in stages:
            summary["hand_default"] = by_hand("hand_default", [])
            if left() > 200:
                summary["hand_eager"] = by_hand("hand_eager", ["--enforce-eager"])
        if "bringup" in stages and left() > 150:
            summary["bringup"] = through_bringup()
    except Exception as e:
        import traceback
        summary["error"] = traceback.format_exc()
        log(f"error: {e!r}")
    finally:
        summary["total_s"] = round(time.monotonic() - T0, 3)
        (OUT / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        with tarfile.open(OUT / "work.tar.gz", "w:gz") as tar:
            for p in sorted(WORK.iterdir()):
                if p.name != MODEL.name:
                    tar.add(p, arcname=p.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
