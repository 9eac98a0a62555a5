"""A sweep's warmup that gets no answer fails its configuration (a sweep whose every warmup failed said "0
configurations failed" and exited 0: the Slurm sweep sent its load to the configured `{head}` address). Against a
real HTTP server on loopback that lists a model and refuses every generation; the runner files the configuration
as failed with this reason (tui/sweep/runner.py `_warmup_failed`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tui.lifecycle.presets import get_preset
from tui.model import Step
from tui.sweep.load import Load
from tui.sweep.plan import parse_plan

PLAN = """name = "w"
[[configs]]
name = "a"
set = { tp-size = 1 }
[matrix]
prompt_tokens = [16]
output_tokens = [8]
concurrency = [1]
requests = 2
"""


class Refusing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_warmup_without_one_answer_fails_and_says_why(refusing: str) -> None:
    plan = parse_plan(PLAN, get_preset("sglang").flags)
    steps: list[tuple[str, Step]] = []
    load = Load(None, plan, lambda: refusing, 10.0, None,  # type: ignore[arg-type]  # the engine: no cell is run
                lambda name, s: steps.append((name, s)))
    assert not await load.warmup(plan.configs[0])
    assert load.warmup_error.startswith("no warmup request succeeded (0/"), load.warmup_error
    assert steps and str(steps[-1][1].status) == "failed", steps
