"""The simulated server's HTTP surface: SGLang's routes (health, models, server and model info, metrics, the
native and OpenAI generation routes with their streams), its answers and its uvicorn-style access lines. The
server's state is the `Sim`'s (server.py); this module only speaks HTTP. Stdlib only, Python 3.9+.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

#: the context length the served model reports
CONTEXT_LEN = 262144
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "engineers", "wait"]


class Generation(Protocol):
    """One generation as the scheduler runs it (server.py's `Req`): tokens so far, and whether it is done."""

    @property
    def generated(self) -> int: ...

    @property
    def done(self) -> threading.Event: ...


class Lines(Protocol):
    def line(self, msg: str, rank: int | None = None) -> None: ...

    def info(self, msg: str, rank: int | None = None) -> None: ...


class Routes(Protocol):
    @property
    def ready_route(self) -> bool: ...


class Holder(Protocol):
    @property
    def data(self) -> dict[str, Any]: ...


class Served(Protocol):
    """What the HTTP surface needs of the server (server.py's `Sim`): declared here, so that this module does not
    import the server that imports it."""

    @property
    def a(self) -> argparse.Namespace: ...

    @property
    def state(self) -> str: ...

    @property
    def log(self) -> Lines: ...

    @property
    def rel(self) -> Routes: ...

    @property
    def holder(self) -> Holder: ...

    @property
    def cond(self) -> threading.Condition: ...

    @property
    def answered(self) -> threading.Event: ...

    def model_info(self) -> dict[str, Any]: ...

    def server_info(self) -> dict[str, Any]: ...

    def metrics(self) -> str: ...

    def count_stream(self) -> None: ...

    def submit(self, prompt: int, max_new: int, stream: bool = False) -> Generation: ...


def _text(start: int, end: int) -> str:
    return "".join(WORDS[i % len(WORDS)] + " " for i in range(start, end))


def _err(msg: str, code: int = 400) -> dict[str, Any]:
    return {"object": "error", "message": msg, "type": "BadRequestError", "param": None, "code": code}


class HTTPServer(ThreadingHTTPServer):
    """http.server's threading server, silent about a client that went away: socketserver prints a traceback for
    every BrokenPipe or ConnectionReset (a probe that timed out and closed), which uvicorn, the server SGLang runs,
    does not. Those lines were the only "errors" of a healthy demo (issue 51); any other exception still prints."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipe, ConnectionReset, ConnectionAborted
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """SGLang's HTTP surface; uvicorn-style access lines replace http.server's own logging."""

    protocol_version = "HTTP/1.1"
    sim: Served

    def version_string(self) -> str:
        return "uvicorn"

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        c = int(code) if str(code).isdigit() else 0
        host, port = self.client_address[:2]
        phrase = HTTPStatus(c).phrase if c else ""
        self.sim.log.info(f'INFO:     {host}:{port} - "{self.requestline}" {c} {phrase}')

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, code: int, body: Any, ctype: str = "application/json") -> None:
        if not isinstance(body, bytes):
            body = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.route("GET")

    def do_POST(self) -> None:
        self.route("POST")

    def route(self, method: str) -> None:
        sim, path = self.sim, urlsplit(self.path).path
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if method == "GET" and path in ("/get_model_info", "/get_server_info") and sim.state != "stopping":
            sim.log.line(f"Endpoint '{path}' is deprecated and will be removed in a future version. Please use "
                         f"'/{path[5:]}' instead.")
        path = {"/health_generate": "/health", "/get_model_info": "/model_info",
                "/get_server_info": "/server_info"}.get(path, path)
        gets = ("/health", "/v1/models", "/model_info", "/server_info", "/metrics",
                *(("/ready",) if sim.rel.ready_route else ()))
        posts = ("/generate", "/v1/completions", "/v1/chat/completions")
        name = sim.a.served_model_name
        if sim.state == "stopping":
            self.close_connection = True
            self.send(503, {"detail": "Server is shutting down"})
        elif path == "/flush_cache":
            self.send(200, "Cache flushed.\nPlease check backend logs for more details. (When there are "
                      "running or waiting requests, the operation will not be performed.)\n", "text/plain")
        elif method == "GET" and path == "/health":
            self.send(200 if sim.state in ("ready", "stale") else 503, b"", "text/plain")
        elif method == "GET" and path == "/ready" and sim.rel.ready_route:
            self.send(200 if sim.state == "ready" else 503, b"", "text/plain")
        elif method == "GET" and path == "/v1/models":
            self.send(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": int(sim.holder.data["started"]),
                 "owned_by": "sglang", "root": name, "max_model_len": CONTEXT_LEN}]})
        elif method == "GET" and path in ("/model_info", "/server_info"):
            self.send(200, sim.model_info() if path == "/model_info" else sim.server_info())
        elif method == "GET" and path == "/metrics" and sim.a.enable_metrics:
            self.send(200, sim.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif method == "POST" and path in posts and sim.state == "stale":
            self.send(503, _err("The server is shutting down.", 503))
        elif method == "POST" and path in posts:
            try:
                req = json.loads(body or b"{}")
                if not isinstance(req, dict):
                    raise ValueError("the body must be a JSON object")
                self.generate(path, req)
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                self.send(400, _err(f"Invalid request: {e!r}"))
        elif path in gets + posts and path != "/metrics":
            self.send(405, {"detail": "Method Not Allowed"})
        else:
            self.send(404, {"detail": "Not Found"})

    def generate(self, path: str, req: dict[str, Any]) -> None:
        """Native /generate and the OpenAI routes; ``stream`` sends SSE chunks as tokens appear."""
        sim = self.sim
        kind = {"/generate": "native", "/v1/completions": "cmpl"}.get(path, "chat")
        if kind == "native":
            text = req.get("text") or ""
            max_new = (req.get("sampling_params") or {}).get("max_new_tokens", 128)
        elif kind == "cmpl":
            text, max_new = req.get("prompt") or "", req.get("max_tokens") or 16
        else:
            text = " ".join(str(m.get("content", "")) for m in list(req["messages"]))
            max_new = req.get("max_completion_tokens") or req.get("max_tokens") or 128
        max_new, prompt = int(max_new), max(1, len(str(text)) // 4)
        if max_new < 0:
            raise ValueError("max_new_tokens must be >= 0")
        if kind == "chat" and req.get("stream"):
            sim.count_stream()
        r = sim.submit(prompt, max_new, bool(req.get("stream")))
        rid, created = os.urandom(16).hex(), int(time.time())
        obj = {"chat": "chat.completion", "cmpl": "text_completion"}.get(kind, "")

        def payload(delta: str | None, finish: str | None, first: bool = False) -> dict[str, Any]:
            """A whole response (``delta`` None), or one stream chunk; the final one carries usage."""
            if kind == "native":
                return {"text": _text(0, r.generated), "meta_info": {
                    "id": rid, "finish_reason": {"type": finish, "length": max_new} if finish else None,
                    "prompt_tokens": prompt, "completion_tokens": r.generated, "cached_tokens": 0}}
            c: dict[str, Any] = {"index": 0}
            if kind == "cmpl":
                c.update(text=_text(0, r.generated) if delta is None else delta, logprobs=None)
            elif delta is None:
                c["message"] = {"role": "assistant", "content": _text(0, r.generated),
                                "reasoning_content": None, "tool_calls": None}
            else:
                c["delta"] = {"content": delta} if delta else {}
                if first:
                    c["delta"] = {"role": "assistant", "content": ""}
            c.update(finish_reason=finish, matched_stop=None)
            out = {"id": rid, "object": obj + (".chunk" if kind == "chat" and delta is not None else ""),
                   "created": created, "model": sim.a.served_model_name, "choices": [c]}
            if finish:
                out["usage"] = {"prompt_tokens": prompt, "completion_tokens": r.generated,
                                "total_tokens": prompt + r.generated}
            return out

        if not req.get("stream"):
            r.done.wait()
            self.send(200, payload(None, "length"))
            sim.answered.set()
            return None
        self.send_response(200)
        for k, v in (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                     ("Transfer-Encoding", "chunked")):
            self.send_header(k, v)
        self.end_headers()

        def emit(data: Any) -> None:
            raw = f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()

        try:
            sent = 0
            if kind == "chat":
                emit(payload("", None, first=True))
            while True:
                with sim.cond:
                    while r.generated == sent and not r.done.is_set():
                        sim.cond.wait(0.5)
                    now_gen, done = r.generated, r.done.is_set()
                if now_gen > sent and not (done and kind == "native"):
                    emit(payload(_text(sent, now_gen), None))
                sent = now_gen
                if done:
                    emit(payload("", "length"))
                    emit("[DONE]")
                    break
            self.wfile.write(b"0\r\n\r\n")
            sim.answered.set()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        return None
