"""The console in a real browser, for tests/e2e/test_browser.py and screenshots/make_browser_screenshot.py:
`bringup serve` as a subprocess on a free loopback port, Debian's Chromium driven by Playwright, and the screen read
back from the page's own terminal.

The page draws the console with xterm.js on a canvas, so there is no text in the DOM to read. What the browser
shows is xterm.js's buffer: an init script keeps each Terminal that the page's own (unmodified) textual.js creates,
by a setter for `terminal` on Object.prototype that turns into a plain property at the first assignment, and
`Screen.text()` reads the visible rows from it. Nothing served is changed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.ports import free_port
from tests.helpers.wait import slack

CHROMIUM = "/usr/bin/chromium"
#: headless, and no traffic of Chromium's own (updates, sync, safe browsing): the tests reach 127.0.0.1 only
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REQUIRED = "BRINGUP_BROWSER"

_KEEP_TERMINALS = """
(() => {
  window.__bringupTerminals = [];
  Object.defineProperty(Object.prototype, 'terminal', {
    configurable: true,
    set(value) {
      Object.defineProperty(this, 'terminal', {value, writable: true, configurable: true, enumerable: true});
      if (value && value.buffer && value.buffer.active) window.__bringupTerminals.push(value);
    },
  });
})();
"""

_ROWS = """() => {
  const t = (window.__bringupTerminals || [])[0];
  if (!t) return null;
  const b = t.buffer.active, rows = [];
  for (let y = 0; y < t.rows; y++) {
    const line = b.getLine(b.viewportY + y);
    rows.push(line ? line.translateToString(true) : '');
  }
  return rows.join('\\n');
}"""


def chromium_or_skip() -> str:
    """The system's Chromium and Playwright, or a skip that says what is missing (a failure with
    BRINGUP_BROWSER=required, as .ci/run sets: CI must not pass by skipping)."""
    missing = []
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path is None:
        missing.append("chromium (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install -e '.[test]')")
    if missing:
        why = " and ".join(missing) + " not installed"
        if os.environ.get(REQUIRED) == "required":
            pytest.fail(f"{why}, but {REQUIRED}=required (.ci/run installs them)")
        pytest.skip(f"{why}; {REQUIRED}=required makes this a failure")
    assert path is not None
    return path


@contextlib.contextmanager
def chromium(path: str = CHROMIUM) -> Iterator[Any]:
    """A headless Chromium (never `playwright install`: the system's browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def killable_chromium(tmp: Path, path: str = CHROMIUM) -> Iterator[tuple[Any, Callable[[], None]]]:
    """A headless Chromium of our own start, driven over CDP, and a function that SIGKILLs it (with every process
    of its own group): a browser that dies without closing its websockets, as a crash or `kill -9` leaves them."""
    from playwright.sync_api import sync_playwright

    profile = tmp / f"chromium-{os.getpid()}-{time.monotonic_ns()}"
    profile.mkdir()
    proc = subprocess.Popen([path, *CHROMIUM_ARGS, "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=env())

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    try:
        active = profile / "DevToolsActivePort"  # Chromium writes its port here once it listens
        deadline = time.monotonic() + slack(60)
        while not (active.exists() and active.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "Chromium did not open its DevTools port"
            time.sleep(0.05)
        port = int(active.read_text().split()[0])
        with sync_playwright() as p:
            yield p.chromium.connect_over_cdp(f"http://127.0.0.1:{port}"), kill
    finally:
        kill()


class Screen:
    """A page of the served console, read as text the way the browser holds it."""

    def __init__(self, page: Any) -> None:
        self.page = page
        page.add_init_script(_KEEP_TERMINALS)
        # the page must reach nothing but the server: anything else fails the test that made it
        self.outside: list[str] = []
        page.on("request", self._request)

    def _request(self, request: Any) -> None:
        host = re.sub(r"^[a-z]+://([^/:]+).*", r"\1", request.url)
        if host not in ("127.0.0.1", "localhost") and not request.url.startswith(("data:", "blob:")):
            self.outside.append(request.url)

    def text(self) -> str:
        return str(self.page.evaluate(_ROWS) or "")

    def wait_for(self, what: str, pred: Callable[[str], bool], timeout: float = 60.0) -> str:
        """Poll the screen (every 50 ms) until `pred` holds; the last screen in the failure otherwise (`timeout`
        stretched by `slack`)."""
        timeout = slack(timeout)
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if pred(text):
                return text
            self.page.wait_for_timeout(50)
        raise AssertionError(f"the browser never showed {what} within {timeout:g} s; last screen:\n{text}")

    def wait_text(self, needle: str, timeout: float = 60.0) -> str:
        return self.wait_for(repr(needle), lambda t: needle in t, timeout)

    def press(self, key: str) -> None:
        """A key as a user types it: into xterm.js's input, which sends it down the websocket to the console."""
        self.page.locator(".xterm-helper-textarea").focus()
        self.page.keyboard.press(key)


@dataclass
class Served:
    """A running `bringup serve`: its URL, its token (with --token or --allow-actions) and its process."""

    url: str
    token: str | None
    proc: subprocess.Popen[str]
    log: Path

    @property
    def port(self) -> int:
        return int(self.url.rstrip("/").rsplit(":", 1)[1])

    def consoles(self) -> list[int]:
        """The session consoles this server runs now: its children that run `console` (found by parent pid, not by
        name across the machine: other tests serve consoles too)."""
        return [pid for pid in children(self.proc.pid) if b"console" in _cmdline(pid)]


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name: [state, ppid, pgid, ...]; [] for no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _running() -> Iterator[tuple[int, list[str]]]:
    """Every process that runs (zombies, which have ended and wait only for their parent's wait, left out)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) and fields[0] not in ("Z", "X"):
            yield int(entry), fields


def alive(pid: int) -> bool:
    """The process runs (not ended, not a zombie)."""
    return (fields := _stat(pid)) != [] and fields[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    return [child for child, fields in _running() if int(fields[1]) == pid]


def live_in_group(pgid: int) -> list[int]:
    """The processes of a process group that still run."""
    return [pid for pid, fields in _running() if int(fields[2]) == pgid]


def console_processes(cfg: Path) -> list[int]:
    """The served consoles still running on this config (each browser session runs one)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if b"console" in words and str(cfg.resolve()).encode() in words:
            found.append(int(entry))
    return found


def wait_consoles(cfg: Path, n: int, timeout: float = 30.0) -> list[int]:
    """Wait until exactly `n` served consoles run on `cfg` (a closed session's console takes a moment to quit)."""
    deadline = time.monotonic() + slack(timeout)
    while len(found := console_processes(cfg)) != n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(found)} served consoles, not {n}: {found}")
        time.sleep(0.05)
    return found


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith("BRINGUP_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}


@contextlib.contextmanager
def serve(cfg: Path, *args: str) -> Iterator[Served]:
    """`bringup serve` on a free loopback port; yields once it has said where it serves. SIGTERM at the end, which
    must be a clean exit 0 that leaves no console behind."""
    port = free_port()
    log = cfg.parent / f"serve-{port}.err"
    with log.open("w") as err:
        p = subprocess.Popen([sys.executable, "-m", "tui", "--config", str(cfg), "serve", "--listen",
                              f"127.0.0.1:{port}", *args], stdout=subprocess.PIPE, stderr=err, text=True,
                             env=env(), cwd=cfg.parent, stdin=subprocess.DEVNULL)
        rc: int | None = None
        try:
            assert p.stdout is not None
            first = p.stdout.readline()
            url = f"http://127.0.0.1:{port}/"
            assert first.startswith(f"serving the console at {url}"), first + log.read_text()
            token = None
            if "--token" in args or "--allow-actions" in args:  # a console that can act always asks for one
                # none printed: a failure, not a hang (a thread, not select(): the line may already sit in the
                # pipe's reader buffer with the first one, where select() does not see it)
                line: list[str] = []
                out = p.stdout
                reader = threading.Thread(target=lambda: line.append(out.readline()), daemon=True)
                reader.start()
                reader.join(slack(30))
                m = re.search(r"access token \(printed only now\): (\S+)", line[0] if line else "")
                assert m, "no access token printed\n" + log.read_text()
                token = m[1]
            yield Served(url, token, p, log)
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(timeout=slack(30))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    assert rc == 0, f"bringup serve exited {rc}:\n{log.read_text()}"
