"""Helpers for the end-to-end tests of the `bringup` CLI (tests/e2e/test_cli_e2e.py).

Every bringup command runs as a process of its own (`python -m tui --config FILE ...`, or the same forked from a
process with the modules loaded: tests/helpers/preloaded.py) in the test's tmp_path with
HOME and the XDG directories pointing into it, against the simulated SGLang server (`tui.sim`) started by the
`process` manager. Only the config file is built with bringup's own config model (tests/helpers/simdeploy.py);
nothing else here imports bringup: the tests see only what a user sees (exit code, stdout, stderr, the files in the
state directory, the HTTP endpoint and the processes).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.preloaded import Forked, Preloaded
from tests.helpers.processes import kill_processes, process_alive, sim_processes, wait_no_sim_processes
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host
from tests.helpers.wait import slack

__all__ = ["READY_LINE", "Bringup", "Poller", "Proc", "Result", "free_port", "kill_processes", "parse_json_stream",
           "process_alive", "sim_processes", "toml_list", "toml_str", "wait_no_sim_processes"]

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
READY_LINE = "The server is fired up and ready to roll!"
# a proxy-free opener: the tests talk to 127.0.0.1 only
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def toml_str(s: str) -> str:
    return json.dumps(str(s))  # a JSON string is a valid TOML basic string


def toml_list(items: Iterable[Any]) -> str:
    return "[" + ", ".join(toml_str(x) if isinstance(x, str | Path) else str(x) for x in items) + "]"


def parse_json_stream(text: str) -> list[Any]:
    """Every JSON value in `text`, in order: one-line step objects and the final indented object alike."""
    dec = json.JSONDecoder()
    out: list[Any] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            nl = text.find("\n", i)  # not JSON: skip the line
            i = n if nl < 0 else nl + 1
            continue
        out.append(obj)
        i = end
    return out


@dataclass
class Result:
    args: list[str]
    rc: int
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + self.err

    def json(self) -> Any:
        """The last JSON value printed on stdout."""
        values = parse_json_stream(self.out)
        assert values, f"no JSON on stdout of {self.args}:\n{self.describe()}"
        return values[-1]

    def json_values(self) -> list[Any]:
        return parse_json_stream(self.out)

    def describe(self) -> str:
        return (f"$ bringup {' '.join(self.args)}\n-> rc={self.rc} in {self.seconds:.1f}s\n"
                f"--- stdout ---\n{self.out[-6000:]}\n--- stderr ---\n{self.err[-6000:]}")


class Proc:
    """A background bringup (or other) process whose output lines are recorded with their arrival times."""

    def __init__(self, cmd: Sequence[str], *, cwd: Path, env: dict[str, str], label: str = "") -> None:
        self.cmd = list(cmd)
        self.label = label or " ".join(self.cmd[-6:])
        self.t0 = time.time()
        self.proc = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out_lines: list[tuple[float, str]] = []
        self.err_lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._read, args=(self.proc.stdout, self.out_lines), daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self.err_lines), daemon=True)]
        for t in self._threads:
            t.start()

    def _read(self, stream: Any, sink: list[tuple[float, str]]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                sink.append((time.time(), line))
        stream.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def out(self) -> str:
        with self._lock:
            return "\n".join(x for _, x in self.out_lines)

    @property
    def err(self) -> str:
        with self._lock:
            return "\n".join(x for _, x in self.err_lines)

    def wait_for(self, pattern: str, timeout: float = 15.0, stream: str = "out") -> tuple[float, str]:
        """Arrival time and text of the first output line matching the regex `pattern` (`timeout` only bounds the
        wait: stretched by `slack`)."""
        rx = re.compile(pattern)
        timeout = slack(timeout)
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                lines = list(self.out_lines if stream == "out" else self.err_lines)
            for t, line in lines:
                if rx.search(line):
                    return t, line
            if time.monotonic() > deadline or (self.proc.poll() is not None and not self._alive_readers()):
                raise AssertionError(f"{self.label}: no line matching {pattern!r} within {timeout:g}s\n"
                                     f"--- stdout ---\n{self.out[-4000:]}\n--- stderr ---\n{self.err[-4000:]}")
            time.sleep(0.02)

    def _alive_readers(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def finish(self, timeout: float = 30.0) -> Result:
        timeout = slack(timeout)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.label}: still running after {timeout:g}s\n--- stdout ---\n"
                                 f"{self.out[-4000:]}\n--- stderr ---\n{self.err[-4000:]}") from None
        for t in self._threads:
            t.join(slack(5))
        return Result(self.cmd, rc, self.out + "\n", self.err + "\n", time.time() - self.t0)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(slack(5))


@dataclass
class Bringup:
    """One test's world: a config with one `process` deployment of the simulated server, in its own tmp dir."""

    tmp: Path
    name: str = "sim"
    port: int = field(default_factory=free_port)
    time_scale: float = 0.1
    scenario: str = ""
    sim_args: tuple[str, ...] = ()
    release_timeout_s: float = 60.0
    stop_timeout_s: float = 20.0

    def __post_init__(self) -> None:
        self.state_dir = self.tmp / "state"
        self.sim_state = self.tmp / "simgpu"
        # not ./config.toml: discovery must not find it by accident, every command names it
        self.config = self.tmp / "etc" / "bringup.toml"
        self.pwned = self.tmp / "pwned"
        for d in ("etc", "home", "xdg-config", "xdg-state", "xdg-cache", "xdg-runtime"):
            (self.tmp / d).mkdir(exist_ok=True)
        os.chmod(self.tmp / "xdg-runtime", 0o700)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("BRINGUP_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        env.update(HOME=str(self.tmp / "home"), XDG_CONFIG_HOME=str(self.tmp / "xdg-config"),
                   XDG_STATE_HOME=str(self.tmp / "xdg-state"), XDG_CACHE_HOME=str(self.tmp / "xdg-cache"),
                   XDG_RUNTIME_DIR=str(self.tmp / "xdg-runtime"), BRINGUP_SIM_STATE=str(self.sim_state),
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", PYTHONUNBUFFERED="1")
        self.env = env
        self.write_config()

    # ------------------------------------------------------------------ config and files

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def sim_command(self, port: int | None = None, *extra: str) -> list[str]:
        cmd = sim_command(port or self.port, self.sim_state, time_scale=self.time_scale)
        if self.scenario:
            cmd += ["--scenario", self.scenario]
        return [*cmd, *self.sim_args, *extra]

    def write_config(self) -> None:
        dep = process_deployment(self.sim_command(), self.port, release_timeout_s=self.release_timeout_s,
                                 stop_timeout_s=self.stop_timeout_s)
        ConfigFile(state_dir=self.state_dir, hosts={"simhost": sim_host(self.sim_state)},
                   deployments={self.name: dep}).write(self.config)

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "deployments" / self.name

    def read_json(self, name: str) -> Any:
        p = self.run_dir / name
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def argv_json(self) -> Any:
        return self.read_json("argv.json")

    def argv_bytes(self) -> bytes | None:
        try:
            return (self.run_dir / "argv.json").read_bytes()
        except OSError:
            return None

    def current(self) -> dict[str, Any] | None:
        rec = self.read_json("current.json")
        return rec if isinstance(rec, dict) else None

    def invocation(self) -> str | None:
        rec = self.current()
        return str(rec["invocation"]) if rec else None

    def log_lines(self, invocation: str) -> list[tuple[float, str]]:
        """The supervisor's `<epoch> <text>` log of one invocation, parsed."""
        out = []
        path = self.run_dir / "logs" / f"{invocation}.log"
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            ts, _, text = raw.partition(" ")
            with contextlib.suppress(ValueError):
                out.append((float(ts), text))
        return out

    def log_time(self, invocation: str, needle: str) -> float:
        for t, text in self.log_lines(invocation):
            if needle in text:
                return t
        raise AssertionError(f"{needle!r} not in the log of invocation {invocation}")

    # ------------------------------------------------------------------ running bringup

    def cmd(self, *args: str, config: Path | bool | None = True) -> list[str]:
        conf: list[str] = []
        if config is True:
            conf = ["--config", str(self.config)]
        elif isinstance(config, Path):
            conf = ["--config", str(config)]
        # `--config` is accepted both before and after the subcommand; put it after, like a user would
        return [PY, "-m", "tui", *args[:1], *conf, *args[1:]] if args else [PY, "-m", "tui", *conf]

    def run(self, *args: str, timeout: float = 40.0, config: Path | bool | None = True,
            env: dict[str, str] | None = None, cwd: Path | None = None, fresh: bool = False) -> Result:
        """The command run to its end. Forked from a process with bringup's modules loaded (tests/helpers/
        preloaded.py) unless `fresh` or $BRINGUP_TESTS_FRESH=1: then a new `python -m tui`, start-up and all.
        `timeout` bounds the command on an idle machine: stretched by `slack`."""
        cmd = self.cmd(*args, config=config)
        timeout = slack(timeout)
        t0 = time.time()
        p: subprocess.Popen[bytes] | Forked
        server = None if fresh or os.environ.get("BRINGUP_TESTS_FRESH") == "1" else Preloaded.get()
        if server is not None and server.serves(env or self.env):
            p = server.start(cmd[3:], cwd=cwd or self.tmp, env=env or self.env)
        else:
            p = subprocess.Popen(cmd, cwd=cwd or self.tmp, env=env or self.env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out_b, err_b = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # a hung bringup dumps its threads' stacks on SIGUSR1 (faulthandler): keep them for the report
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
            p.kill()
            out_b, err_b = p.communicate()
            out = out_b.decode("utf-8", "replace")
            err = err_b.decode("utf-8", "replace")
            raise AssertionError(f"bringup {' '.join(args)} did not finish within {timeout:g}s\n"
                                 f"--- stdout ---\n{out[-4000:]}\n--- stderr ---\n{err[-6000:]}") from None
        return Result(list(args), p.returncode, out_b.decode("utf-8", "replace"),
                      err_b.decode("utf-8", "replace"), time.time() - t0)

    def ok(self, *args: str, timeout: float = 40.0) -> Result:
        r = self.run(*args, timeout=timeout)
        assert r.rc == 0, r.describe()
        return r

    def popen(self, *args: str, label: str = "") -> Proc:
        return Proc(self.cmd(*args), cwd=self.tmp, env=self.env, label=label or "bringup " + " ".join(args))

    def status(self) -> dict[str, Any]:
        r = self.run("status", self.name, "--json")
        assert r.rc in (0, 1), r.describe()
        d = r.json()
        assert isinstance(d, dict), r.describe()
        return d

    def bring_up(self, *extra: str, timeout: float = 40.0) -> Result:
        """`bringup restart NAME --yes [extra]`, asserting it reached ready."""
        r = self.run("restart", self.name, "--yes", *extra, timeout=timeout)
        assert r.rc == 0, r.describe()
        return r

    # ------------------------------------------------------------------ HTTP

    def http_get(self, path: str, timeout: float = 1.0, port: int | None = None) -> tuple[int, bytes]:
        url = f"http://127.0.0.1:{port or self.port}{path}"
        try:
            with _OPENER.open(url, timeout=slack(timeout)) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


class Poller:
    """Polls one URL in a thread as fast as it can (every `interval` s) and records (time, status)."""

    def __init__(self, url: str, interval: float = 0.02) -> None:
        self.url = url
        self.interval = interval
        self.samples: list[tuple[float, int | None, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(slack(5))

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.time()
            status: int | None
            body = b""
            try:
                with _OPENER.open(self.url, timeout=0.5) as r:
                    status, body = r.status, r.read()
            except urllib.error.HTTPError as e:
                status = e.code
            except (OSError, ValueError):
                status = None
            self.samples.append((t, status, body))
            self._stop.wait(self.interval)
