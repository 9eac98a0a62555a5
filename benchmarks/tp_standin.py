"""A tensor-parallel stand-in server for the multi-GPU proof (benchmarks/multigpu_restart.py): real GPU memory,
real collectives, SGLang's log lines, and the shutdown that makes restarts hard.

    python3 benchmarks/tp_standin.py --tp 8 --mem-gib 120 --port 30000 [--linger-rank 3 --linger-s 20]

The main process (SGLang's launcher) starts one scheduler process per rank; each holds `--mem-gib` of memory on its
GPU (rank r on GPU r mod the GPUs there are) and joins one process group: NCCL with one rank a GPU, gloo where
ranks share a GPU (NCCL refuses two ranks on one device), which is how the one-GPU machine runs four. Rank 0 serves
HTTP (/health, /v1/models, /v1/completions, /generate); every generated token is one all-reduce over all ranks. Lines
are SGLang's: `[ts TPr] Load weight end. ...`, `The server is fired up and ready to roll!`.

Stopping is the hard part it stands in for: SIGTERM to the main process makes it tell rank 0 and exit at once
(the unit's main process is gone); rank 0 broadcasts the stop; rank r then exits after `--exit-step-s` x r seconds,
and `--linger-rank` only after `--linger-s`, holding its memory all the while (a straggler rank). A start while
any of it is still held runs into a real CUDA out-of-memory error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def log(msg: str, rank: int | None = None) -> None:
    ts = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    tag = f" TP{rank}" if rank is not None else ""
    sys.stdout.write(f"[{ts}{tag}] {msg}\n")
    sys.stdout.flush()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", "--tp-size", dest="tp", type=int, default=8)
    p.add_argument("--mem-gib", type=float, default=100.0, help="memory each rank holds on its GPU")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--model-path", default="stand-in/tp-model")
    p.add_argument("--exit-step-s", type=float, default=1.0, help="rank r exits r x this after the stop")
    p.add_argument("--linger-rank", type=int, default=-1)
    p.add_argument("--linger-s", type=float, default=20.0)
    p.add_argument("--disable-cuda-graph", action="store_true", help="accepted, as SGLang's (a flag to toggle)")
    p.add_argument("--enable-metrics", action="store_true", help="accepted, as SGLang's")
    p.add_argument("--detach-ranks", action="store_true",
                   help="ranks in sessions of their own: the service manager sees only the main process end, and the "
                        "ranks' memory outlives what it calls the run (GPU memory is then all that says it is held)")
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--rdv-port", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------- the main process


def launcher(a: argparse.Namespace) -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        rdv = s.getsockname()[1]
    log(f"server_args=ServerArgs(model_path={a.model_path!r}, tp_size={a.tp}, port={a.port}, "
        f"disable_cuda_graph={a.disable_cuda_graph}, mem_gib={a.mem_gib})")
    base = [sys.executable, "-u", os.path.abspath(__file__), *sys.argv[1:]]
    ranks = [subprocess.Popen([*base, "--rank", str(r), "--rdv-port", str(rdv)], start_new_session=a.detach_ranks)
             for r in range(a.tp)]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.is_set():
        dead = [(r, p.returncode) for r, p in enumerate(ranks) if p.poll() is not None]
        if dead:
            r, code = dead[0]
            log(f"Subprocess scheduler_{r} (pid={ranks[r].pid}) crashed with exit code {code}. "
                "Triggering SIGQUIT for cleanup...")
            log("Received sigquit from a child process. It usually means the child failed.")
            for p in ranks:
                if p.poll() is None:
                    p.kill()
            return 1
        stop.wait(0.2)
    log("SIGTERM received. signum=15 frame=None. Draining requests and shutting down...")
    if ranks[0].poll() is None:
        ranks[0].send_signal(signal.SIGTERM)  # rank 0 tells the others; we do not wait for any of them
    return 0


# ---------------------------------------------------------------------------------------------- a rank


def rank_main(a: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    r = a.rank
    gpus = torch.cuda.device_count()
    shared = a.tp > gpus
    dev = torch.device("cuda", r % gpus)
    torch.cuda.set_device(dev)
    stop = threading.Event()
    if r == 0:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    else:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM: wait for rank 0's stop instead
    log("Init torch distributed begin.", r)
    dist.init_process_group("gloo" if shared else "nccl", init_method=f"tcp://127.0.0.1:{a.rdv_port}",
                            rank=r, world_size=a.tp, timeout=datetime.timedelta(hours=2))
    comm = torch.device("cpu") if shared else dev
    log(f"Init torch distributed ends. backend={'gloo' if shared else 'nccl'}", r)
    log(f"Load weight begin. avail mem={torch.cuda.mem_get_info(dev)[0] / 2**30:.2f} GB", r)
    t0 = time.time()
    try:
        hold = torch.empty(int(a.mem_gib * 2**30), dtype=torch.uint8, device=dev)
        hold.fill_(1)
    except torch.OutOfMemoryError as e:
        log("Scheduler hit an exception: Traceback (most recent call last):\n"
            f'  File "tp_standin.py", line 1, in load_model\ntorch.OutOfMemoryError: {e}', r)
        return 1
    torch.cuda.synchronize(dev)
    log(f"Load weight end. elapsed={time.time() - t0:.2f} s, type=StandIn, mem usage={a.mem_gib:.2f} GB.", r)
    one = torch.ones(1, device=comm)
    jobs: queue.Queue[tuple[int, queue.Queue[int]]] = queue.Queue()
    if r == 0:
        serve(a, jobs)
        log("The server is fired up and ready to roll!")
    cmd = torch.zeros(1, dtype=torch.int64, device=comm)
    while True:
        reply: queue.Queue[int] | None = None
        if r == 0:
            n = -1 if stop.is_set() else 0
            if n == 0:
                try:
                    n, reply = jobs.get(timeout=0.05)
                except queue.Empty:
                    n = 0
            cmd.fill_(n)
        dist.broadcast(cmd, 0)
        n = int(cmd.item())
        if n < 0:
            break
        for _ in range(n):  # one all-reduce per generated token, as tensor parallelism does
            x = one.clone()
            dist.all_reduce(x)
        if reply is not None:
            reply.put(n)
    delay = a.linger_s if r == a.linger_rank else a.exit_step_s * r
    log(f"Scheduler exiting in {delay:.1f} s, holding {a.mem_gib:.1f} GB until then", r)
    time.sleep(delay)
    del hold
    os._exit(0)  # no process-group teardown: ranks leave one by one, as a real tree does


def serve(a: argparse.Namespace, jobs: queue.Queue[tuple[int, queue.Queue[int]]]) -> None:
    class H(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:
            log(f'INFO:     127.0.0.1 - "{self.command} {self.path}" {args[1] if len(args) > 1 else ""}')

        def send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self.send(200, {})
            elif self.path == "/v1/models":
                self.send(200, {"object": "list", "data": [{"id": a.model_path, "object": "model"}]})
            else:
                self.send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(length) or b"{}")
            n = int(req.get("max_tokens") or (req.get("sampling_params") or {}).get("max_new_tokens") or 8)
            reply: queue.Queue[int] = queue.Queue()
            jobs.put((max(1, min(n, 512)), reply))
            got = reply.get(timeout=120)
            text = " ".join(["ok"] * got)
            self.send(200, {"id": "cmpl-1", "object": "text_completion", "model": a.model_path,
                            "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
                            "usage": {"completion_tokens": got}})

    httpd = ThreadingHTTPServer((a.host, a.port), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    log(f"INFO:     Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)")


if __name__ == "__main__":
    args = parse()
    sys.exit(rank_main(args) if args.rank >= 0 else launcher(args))
