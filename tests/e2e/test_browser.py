"""`bringup serve` in a real browser: Debian's Chromium driven by Playwright, the real textual-serve, and the
simulated deployment as real processes on loopback. The page loads, the lifecycle panel follows the deployment
through its phases as the CLI starts it, keys reach the console, an action key is refused in read-only mode (and
the deployment is left alone), a wrong token is refused, and no session's console outlives the server.

Skipped when Chromium or Playwright is missing, unless BRINGUP_BROWSER=required (.ci/run sets it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.browser import (
    Screen,
    alive,
    chromium,
    chromium_or_skip,
    console_processes,
    env,
    killable_chromium,
    live_in_group,
    serve,
    wait_consoles,
)
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import HIDDEN, config_with_another, write_config
from tests.helpers.wait import slack

pytestmark = pytest.mark.slow

PANELS = ("Lifecycle", "GPUs", "Log", "Throughput")
STARTING = ("STARTING", "LOADING", "GRAPH-CAPTURE", "WARMUP")


def bringup(cfg: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True, text=True,
                          timeout=slack(timeout), env=env(), cwd=cfg.parent, stdin=subprocess.DEVNULL)


def invocation(cfg: Path) -> str:
    """The run the deployment is on now, as `bringup status` says."""
    r = bringup(cfg, "status", "sim", "--json")
    run = json.loads(r.stdout.splitlines()[-1])["invocation"]
    assert run, r.stdout
    return str(run)


def badge(screen: str) -> str:
    """The lifecycle panel's phase badge: the first row inside the panel, e.g. `LOADING`."""
    rows = screen.splitlines()
    for i, row in enumerate(rows[:-1]):
        if "─ Lifecycle" in row:
            inside = rows[i + 1].split("│")
            return inside[1].strip().split(" ")[0] if len(inside) > 1 else ""
    return ""


@pytest.fixture
def browser() -> Iterator[Any]:
    path = chromium_or_skip()
    with chromium(path) as b:
        yield b


@pytest.fixture
def cfg(tmp_path: Path) -> Iterator[Path]:
    """The simulated deployment `sim` in the test's tmp dir, stopped again at the end."""
    path = write_config(tmp_path)
    try:
        yield path
    finally:
        bringup(path, "stop", "sim")


@pytest.fixture
def slow_start_cfg(tmp_path: Path) -> Iterator[Path]:
    """`sim` with its start-up phases a few seconds each, as a real server's are tens of seconds: at the suite's
    time scale the whole start-up is about 3 s, and a console that is a second or two late to see the new run
    under load reads its first lines back in one batch, its phases drawn in one frame and never on screen."""
    path = write_config(tmp_path, time_scale=0.4)
    try:
        yield path
    finally:
        bringup(path, "stop", "sim")


def test_read_only_console_follows_a_bring_up_in_the_browser(browser: Any, slow_start_cfg: Path) -> None:
    cfg = slow_start_cfg
    with serve(cfg, "sim") as served:
        page = browser.new_page(viewport={"width": 1400, "height": 800})
        screen = Screen(page)
        response = page.goto(served.url)
        assert response is not None and response.status == 200
        text = screen.wait_for("the four panels and the deployment stopped",
                               lambda t: all(f"─ {p}" in t for p in PANELS) and badge(t) == "STOPPED")
        assert "bringup — sim @ simhost" in text and "[read-only]" in text, text
        wait_consoles(cfg, 1)  # the session's own console (a websocket reconnected under load: the first one quits)

        # the phase as it changes, seen in the browser while the CLI starts the deployment
        r = bringup(cfg, "start", "sim", "--no-wait")
        assert r.returncode == 0, r.stderr
        seen = ["STOPPED"]

        def ready(t: str) -> bool:
            if (b := badge(t)) and b != seen[-1]:
                seen.append(b)
            return b == "READY"
        text = screen.wait_for("the deployment ready", ready, timeout=90)
        assert [b for b in seen if b in STARTING], seen  # through at least one start-up phase, in the panel
        assert seen.index("STOPPED") < min(seen.index(b) for b in seen if b in STARTING) < seen.index("READY")
        screen.wait_for("GPU rows and throughput", lambda t: "140 GiB" in t and "tok/s" in t)

        # a key reaches the console: `?` opens the help, which says read-only mode is on; Esc closes it
        screen.press("?")
        screen.wait_text("read-only mode")
        screen.press("Escape")
        screen.wait_for("the help closed", lambda t: "read-only mode" not in t and badge(t) == "READY")

        # an action key is refused, with the reason on screen, and nothing happens to the deployment
        before = invocation(cfg)
        screen.press("r")
        screen.wait_text("read-only: no restart")
        assert "Restart sim on simhost?" not in screen.text()
        assert invocation(cfg) == before
        assert badge(screen.text()) == "READY"
        assert not screen.outside, screen.outside  # nothing fetched from outside the box
        page.close()
        wait_consoles(cfg, 0)  # the session closed: its console quits
    assert console_processes(cfg) == []


def test_a_wrong_token_is_refused(browser: Any, cfg: Path) -> None:
    """Actions allowed on loopback: a token is asked all the same (printed once), through a POST form."""
    with serve(cfg, "sim", "--allow-actions") as served:
        assert served.token and len(served.token) >= 32
        page = browser.new_page(viewport={"width": 1400, "height": 800})
        screen = Screen(page)
        posts: list[str] = []
        page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
        # no token: the page asks for it, and no console starts
        response = page.goto(served.url)
        assert response is not None and response.status == 401
        assert page.locator("form[method=post] input[name=token]").count() == 1
        # a wrong one: 403, still no console
        page.fill("input[name=token]", served.token[::-1])
        with page.expect_navigation() as nav:
            page.click("button[type=submit]")
        assert nav.value is not None and nav.value.status == 403
        assert "wrong token" in page.content()
        assert posts == [served.url] and "token" not in page.url, (posts, page.url)  # in the body, not the URL
        # a token in the address is not read at all (it would sit in the history): asked for again
        assert httpx.get(served.url, params={"token": served.token}, timeout=10).status_code == 401
        # the websocket and the static files are behind the gate too, not only the page
        for path in ("ws", "static/js/textual.js"):
            assert httpx.get(served.url + path, timeout=10).status_code == 403, path
        assert console_processes(cfg) == []
        # the right one: the console, with actions (`r` asks to restart rather than saying read-only)
        page.fill("input[name=token]", served.token)
        page.click("button[type=submit]")
        screen.wait_for("the console", lambda t: badge(t) == "STOPPED")
        assert page.url == served.url, page.url  # the token left the address bar for the cookie
        # the session's cookie ends with the browser (issue 47.6): no expiry of its own, not readable by scripts
        cookies = page.context.cookies()
        assert [(c["expires"], c["httpOnly"], c["sameSite"], c["path"]) for c in cookies] == [
            (-1, True, "Strict", "/")], cookies
        assert "[read-only]" not in screen.text()
        screen.press("r")
        screen.wait_text("Restart sim on simhost?")
        screen.press("n")
        screen.wait_for("the dialog closed", lambda t: "Restart sim on simhost?" not in t)
        assert badge(screen.text()) == "STOPPED"
        assert len(console_processes(cfg)) == 1
    # the tab still open: stopping the server ends its session's console too
    wait_consoles(cfg, 0)


def test_actions_ask_for_a_token_on_loopback(cfg: Path) -> None:
    """No browser needed: with --allow-actions the loopback page refuses without the token (printed once); the
    token goes in a POST body, is answered with a cookie and a redirect to the plain page, and the cookie opens it."""
    with serve(cfg, "sim", "--allow-actions") as served:
        assert served.token
        assert httpx.get(served.url, timeout=10).status_code == 401
        assert httpx.get(served.url + "ws", timeout=10).status_code == 403
        assert httpx.get(served.url, params={"token": served.token}, timeout=10).status_code == 401
        assert httpx.post(served.url, data={"token": "guess"}, timeout=10).status_code == 403
        ok = httpx.post(served.url, data={"token": served.token}, timeout=10)
        assert ok.status_code == 303 and ok.headers["location"] == "/", ok
        name = f"bringup-serve-{served.port}"
        cookie = ok.cookies.get(name)
        # a session id, not the token: every other port of the host is sent this cookie too
        assert cookie and cookie != served.token and served.token not in ok.headers["set-cookie"]
        attrs = ok.headers["set-cookie"].lower()
        assert "httponly" in attrs and "samesite=strict" in attrs and "path=/" in attrs, attrs
        assert httpx.get(served.url, cookies={name: cookie}, timeout=10).status_code == 200
        # the token itself as the cookie opens nothing, nor does an id serve never issued
        for forged in (served.token, cookie[::-1]):
            assert httpx.get(served.url, cookies={name: forged}, timeout=10).status_code == 403
            assert httpx.get(served.url + "ws", cookies={name: forged}, timeout=10).status_code == 403
        assert console_processes(cfg) == []  # a page load starts none: the websocket does


def test_loopback_checks_host_and_origin(cfg: Path) -> None:
    """No browser needed: a name that is not loopback in the Host header (a rebinding page) and a websocket from
    another origin are refused; the page itself answers."""
    with serve(cfg, "sim") as served:
        assert httpx.get(served.url, timeout=10).status_code == 200
        assert httpx.get(served.url, headers={"Host": f"attacker.example:{served.port}"},
                         timeout=10).status_code == 403
        ws = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        r = httpx.get(served.url + "ws", headers={**ws, "Origin": "http://attacker.example"}, timeout=10)
        assert r.status_code == 403
        assert console_processes(cfg) == []


def test_a_non_loopback_address_needs_a_token(cfg: Path) -> None:
    r = bringup(cfg, "serve", "--listen", f"0.0.0.0:{free_port()}", timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "non-loopback" in lines[0] and "--token" in lines[0], r.stderr


def test_a_killed_browser_then_serve_leaves_no_console(cfg: Path, tmp_path: Path) -> None:
    """Issue 28.4: Chromium killed (no goodbye on its websocket), then serve stopped: serve exits 0, quietly, and no
    process of the session's console, nor of its process group, is left (found by pid and group, not by name)."""
    path = chromium_or_skip()
    with killable_chromium(tmp_path, path) as (browser, kill), serve(cfg, "sim") as served:
        page = browser.new_page(viewport={"width": 1400, "height": 800})
        screen = Screen(page)
        response = page.goto(served.url)
        assert response is not None and response.status == 200
        screen.wait_for("the console", lambda t: badge(t) == "STOPPED")
        consoles = served.consoles()
        assert len(consoles) == 1, consoles
        groups = {os.getpgid(pid) for pid in consoles}
        assert os.getpgid(served.proc.pid) not in groups  # each console in a group of its own
        kill()
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=slack(30)) == 0
        noise = served.log.read_text()
        for word in ("Event loop is closed", "Task was destroyed", "Traceback", "Exception ignored"):
            assert word not in noise, noise
    # serve has returned: its consoles were stopped and reaped before it did
    assert not [pid for pid in consoles if alive(pid)], consoles
    assert not [pid for g in groups for pid in live_in_group(g)], (groups, consoles)


def test_a_served_deployment_is_all_the_browser_can_open_and_read_only(browser: Any, tmp_path: Path) -> None:
    """Issue 47.6: `serve sim` on a config with another deployment: the picker offers none (the console shows sim
    only), and the keys that would probe the server or write the incident record say read-only."""
    cfg = config_with_another(tmp_path)
    with serve(cfg, "sim") as served:
        page = browser.new_page(viewport={"width": 1400, "height": 800})
        screen = Screen(page)
        page.goto(served.url)
        screen.wait_for("the console", lambda t: badge(t) == "STOPPED")
        screen.press("d")
        screen.wait_text("this console shows sim only")
        assert HIDDEN not in screen.text()
        screen.press("g")
        screen.wait_text("read-only: no probe")
        screen.press("i")
        screen.wait_text("read-only: no incident record")
        assert screen.outside == []
    assert not (tmp_path / "state" / "deployments").exists()
