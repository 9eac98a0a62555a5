"""The reference server (tui/sim) as a process of the test's own on loopback, its output collected line by line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers.ports import free_port
from tests.helpers.wait import slack, until

ROOT = Path(__file__).resolve().parents[2]


class Sim:
    """One sim server process with its stdout collected line by line by a reader thread."""

    def __init__(self, state: Path, *args: str, scale: float = 0.05) -> None:
        self.port = free_port()
        cmd = [sys.executable, "-m", "tui.sim", "--port", str(self.port), "--time-scale", str(scale),
               "--sim-state-dir", str(state), "--tp", "2", *args]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.err = ""
        self.readers = [threading.Thread(target=f, daemon=True) for f in (self._read_out, self._read_err)]
        for t in self.readers:
            t.start()

    def _read_out(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.append(line.decode().rstrip("\n"))

    def _read_err(self) -> None:
        assert self.proc.stderr
        self.err = self.proc.stderr.read().decode()  # bytes: text mode would turn tqdm's \r into \n

    @property
    def out(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 30.0) -> None:
        """Until `text` is in the output; an exit before it fails at once (with the output it gave)."""
        def said() -> bool:
            if text in self.out:
                return True
            if self.proc.poll() is not None:
                self.readers[0].join(slack(1))
                assert text in self.out, self.out[-3000:]
            return False

        until(lambda: f"{text!r} in the output: {self.out[-3000:]}", said, timeout, every=0.01)

    def http(self, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, bytes]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data,
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=slack(10)) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def finish(self, timeout: float = 30.0) -> int:
        """Wait for the exit and for the last output lines (`timeout` only bounds the wait: stretched by slack)."""
        rc = self.proc.wait(slack(timeout))
        for t in self.readers:
            t.join(slack(2))
        return rc

    def term(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.finish()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(slack(5))
