"""No secret leaves bringup (issue 47.3): canary values set every way a secret reaches it (`--api-key` on the
command line, a flag the config declares secret, `HF_TOKEN` and a `*_KEY` in the deployment's `env` and in
bringup's own environment, `restart --set api-key=...`, a server that echoes a rejected `--hf-token`) and every
command run against a `process` deployment of the simulated server: start, restart --set (text and `--json`),
flags, status, wait, record, a tiny sweep, the exporter's scrape and every screen of the console (the overview, help,
the deployment's console, its flags dialog with a pending change of the key, the restart's confirmation, the sweep
view). No canary may appear in any output, in any spelling (each is found by a marker of its own, so JSON's `\u00e9`,
a repr's `\'` and a shell word's `'"'"'` count), nor in any file under the state or results directory that another
user could read. The values bringup needs to start the server again stay in its private (0600) argv files.

The keys are the awkward ones an operator may well have (issue 47's review, findings 3, 4, 5 and 9): the first has
both quotes, a backslash and a letter that is not ASCII (a restart that fails prints the last flags that reached
ready, shell-quoted), one given to `restart --set` is refused (its refusal repeats it), the one `bringup flags` shows
is five characters long (shorter than what the redactor hides by value alone), and the one typed into the flags
dialog has quotes, a backslash and a letter that is not ASCII too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.console_app import screen_text
from tests.helpers.e2e import Bringup, free_port
from tests.helpers.pilot import until as until_pilot
from tests.helpers.simdeploy import FlagConfig, process_deployment, sim_host
from tests.helpers.wait import until
from tui.config.settings import load
from tui.console.control import ControlConsoleApp
from tui.console.overview import CONSOLE_MODE
from tui.model import Phase
from tui.screens.confirm import ConfirmScreen
from tui.screens.flags import FlagsScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.sweep import SweepScreen, sweep_screen_of

pytestmark = pytest.mark.slow


#: each canary, and the markers that find it in any spelling: plain ASCII with no quote, before and after its
#: awkward characters (JSON, repr and shell quoting change only those), so a value hidden in part is found too
API = "sk-canaryAPI'\"7f\\é3e9a51"
REFUSED = "sk-canaryREF-é€5c6d7e"  # refused by `restart --set` (no such letters in a command line), and echoed
NEW_API = "sk-canaryNEW-8b2d41c0"
JSON_API = "k3y-7"  # shorter than the redactor's MIN_LEN: `bringup flags` shows it in a `name value` table
SWEEP_API = "sk-canarySWP-5e0b13aa"
DECLARED = "canaryDECLARED-1d2c3b4a"
ENV_HF = "hf_canaryENV9a8b7c6d"
ENV_KEY = "canaryKEY-3e4f5a6b7c"
OWN_HF = "hf_canaryOWN4d5e6f70"
ECHOED_HF = "hf_canaryECHO0a1b2c3d"
TYPED = "sk-canaryTYP-'\"\\é-77zq"  # typed into the console's flags dialog: refused there, and repeated
TYPED_OK = "sk-canaryTOK-9d8c"  # typed there, and pending (never applied)
MARKERS = {API: ("canaryAPI", "3e9a51"), REFUSED: ("canaryREF", "5c6d7e"), NEW_API: ("canaryNEW",),
           JSON_API: (JSON_API,), SWEEP_API: ("canarySWP",), DECLARED: ("canaryDECLARED",), ENV_HF: ("canaryENV",),
           ENV_KEY: ("canaryKEY",), OWN_HF: ("canaryOWN",), ECHOED_HF: ("canaryECHO",), TYPED: ("canaryTYP", "-77zq"),
           TYPED_OK: ("canaryTOK",)}
CANARIES = tuple(MARKERS)
#: a flag of the simulated server's that the config declares secret (its name says nothing)
DECLARED_FLAG = "--speculative-draft-model-path"

PLAN = f"""
name = "canary"
[[configs]]
name = "base"
[[configs]]
name = "rekeyed"
set = {{ api-key = "{SWEEP_API}" }}

[matrix]
prompt_tokens = [16]
output_tokens = [8]
concurrency = [1]
requests = 1
warmup_requests = 0
"""


class CanaryBringup(Bringup):
    """The test's world with secrets: `sim` (the server, with a key and a declared-secret flag) and `echo` (the
    same server given a `--hf-token` it rejects: argparse echoes the value in the failure)."""

    def write_config(self) -> None:
        env = {"HF_TOKEN": ENV_HF, "VENDOR_API_KEY": ENV_KEY}
        sim = process_deployment([*self.sim_command(), "--api-key", API, DECLARED_FLAG, DECLARED], self.port,
                                 release_timeout_s=self.release_timeout_s, stop_timeout_s=self.stop_timeout_s,
                                 env=env, secret_flags=[DECLARED_FLAG],
                                 extra_flags=[FlagConfig(name="api-key", kind="str"),
                                              FlagConfig(name="scenario", kind="choice",
                                                         choices=["dflash-graph-crash"])])
        # a small share of each GPU: it starts beside `sim` on the same simulated GPUs (a start that would not fit
        # there is refused before it runs, tests/e2e/test_release_others_memory.py), then fails on its own
        echo = process_deployment([*self.sim_command(free_port()), "--mem-fraction-static", "0.05",
                                   "--hf-token", ECHOED_HF], free_port(),
                                  stop_timeout_s=self.stop_timeout_s, env=env)
        ConfigFile(state_dir=self.state_dir, hosts={"simhost": sim_host(self.sim_state)},
                   deployments={self.name: sim, "echo": echo}).write(self.config)


@pytest.fixture
def bu(tmp_path: Path, make_bringup: Callable[..., Bringup]) -> Iterator[CanaryBringup]:
    b = CanaryBringup(tmp_path)
    b.env["HF_TOKEN"] = OWN_HF  # bringup's own environment's token: a server started from it may print it
    yield b
    b.run("stop", b.name, timeout=60)


def leaks(text: str) -> list[str]:
    """The canaries in `text`, in any spelling (by their markers)."""
    return [c for c, markers in MARKERS.items() if any(m in text for m in markers)]


def readable_by_others(path: Path, root: Path) -> bool:
    """Whether another user could read `path`: the file's own mode, or any directory on the way from `root` that
    is not private (0700)."""
    if path.stat().st_mode & 0o044:
        return True
    d = path.parent
    while True:
        if stat.S_IMODE(d.stat().st_mode) & 0o077 and d != root.parent:
            return True
        if d == root:
            return False
        d = d.parent


def keeps_values(p: Path) -> bool:
    """The files that must hold the real values (0600): the command lines the process manager starts (argv*.json,
    current.json), the server's own log as the supervisor keeps it, and the operator's plan copied with its
    results (what a resumed sweep sets)."""
    return (p.name.startswith("argv") or p.name == "current.json" or p.name == "plan.toml"
            or (p.parent.name == "logs" and p.parent.parent.parent.name == "deployments"))


async def console_text(bu: CanaryBringup, results: Path) -> str:
    """Every screen of the console, as painted, with what it notified: the overview of both deployments and its
    help, the running deployment's console (its log panel, the command line; wrapped, errors only) and its help, the
    flags dialog (its table, the value box with a key typed into it and refused, the pending change), the dialog
    closed with the change pending (its notification), the restart's confirmation of that change (answered no), and
    the sweep's view of the sweep run before."""
    app = ControlConsoleApp(load(str(bu.config)), bu.name, fleet=[bu.name, "echo"])
    said: list[str] = []
    notify = app.notify

    def notified(message: str, **kw: Any) -> None:
        said.append(f"{kw.get('title', '')}: {message}")
        notify(message, **kw)
    app.notify = notified  # type: ignore[method-assign]
    async with app.run_test(size=(220, 60)) as pilot:
        try:
            def shown() -> str:
                return screen_text(app)

            async def on(cls: type, what: str) -> str:
                assert await until_pilot(pilot, lambda: isinstance(app.screen, cls), 30), f"no {what}:\n{shown()}"
                await pilot.pause()
                return shown()
            texts = [await on(FleetScreen, "overview")]
            assert await until_pilot(pilot, lambda: app.engine is not None and app.engine.state.phase == Phase.READY
                                     and "ready" in shown().lower(), 60), shown()
            texts.append(shown())
            await pilot.press("question_mark")
            texts.append(await on(HelpScreen, "help on the overview"))
            await pilot.press("escape")
            app.post_message(FleetScreen.OpenAsked(bu.name))
            assert await until_pilot(pilot, lambda: app.current_mode == CONSOLE_MODE and "--api-key" in shown(),
                                     60), shown()
            texts.append(shown())
            for key in ("w", "e"):  # long lines wrapped, and the log's other view (errors only / all lines)
                await pilot.press(key)
                await pilot.pause()
                texts.append(shown())
            assert "--api-key ***" in texts[-3], texts[-3]  # the command line is on the screen, its key hidden
            await pilot.press("question_mark")
            texts.append(await on(HelpScreen, "help on the console"))
            await pilot.press("escape")

            async def pending_key() -> FlagsScreen:
                await pilot.press("f")
                texts.append(await on(FlagsScreen, "flags dialog"))
                dialog = app.screen
                assert isinstance(dialog, FlagsScreen)
                dialog.action_toggle_named("api-key")  # the value box, the key typed into it
                await pilot.pause()
                box = dialog.query_one("#flag-input")
                box.value = TYPED  # type: ignore[attr-defined]
                await pilot.pause()
                texts.append(shown())  # its refusal, which names the value
                await pilot.press("enter")
                await pilot.pause()
                texts.append(shown())
                box.value = TYPED_OK  # type: ignore[attr-defined]
                await pilot.pause()
                await pilot.press("enter")
                assert await until_pilot(pilot, lambda: "api-key" in dialog.pending, 10), shown()
                texts.append(shown())
                assert "pending: --api-key ***" in texts[-1], texts[-1]
                return dialog
            await pending_key()
            await pilot.press("escape")  # closed with the change pending: the notification says what it dropped
            await pilot.pause()
            await pending_key()
            await pilot.press("a")  # the confirmation of the restart with the new key
            texts.append(await on(ConfirmScreen, "confirmation"))
            await pilot.press("escape")
            await pilot.pause()

            ran = next(p.parent for p in results.rglob("sweep.json"))
            app.push_screen(sweep_screen_of(app, ran))
            texts.append(await on(SweepScreen, "sweep view"))
            return "\n".join([*texts, *said])
        finally:
            if app.engine is not None:
                await app.engine.close()
                app.engine = None


def test_no_canary_in_any_output_or_any_file_another_user_can_read(bu: CanaryBringup, tmp_path: Path) -> None:
    said: list[tuple[str, str]] = []

    def run(*args: str, rc: tuple[int, ...] = (0,), timeout: float = 90) -> str:
        r = bu.run(*args, timeout=timeout)
        assert r.rc in rc, r.describe()
        said.append((" ".join(args), r.text))
        return r.text

    run("start", bu.name)
    run("wait", bu.name, "--timeout", "60")
    # a restart that fails (DFLASH with CUDA graphs): it names the last flags that reached ready, shell-quoted
    failed = run("restart", bu.name, "--yes", "--set", "scenario=dflash-graph-crash", rc=(1,))
    assert "last flags that reached ready: " in failed and "--api-key '***'" in failed, failed
    run("restart", bu.name, "--yes", "--unset", "scenario", "--set", f"api-key={REFUSED}", rc=(2,))
    run("restart", bu.name, "--yes", "--unset", "scenario", "--set", f"api-key={NEW_API}")  # `~ --api-key OLD -> NEW`
    run("restart", bu.name, "--yes", "--json", "--set", f"api-key={JSON_API}")
    for args in (("flags", bu.name), ("flags", bu.name, "--json"), ("status", bu.name),
                 ("status", bu.name, "--json"), ("wait", bu.name, "--timeout", "30"),
                 ("wait", bu.name, "--json", "--timeout", "30")):
        run(*args)
    run("record", bu.name, "--out", "-")

    # a server that rejects its command line echoes it: the failure's excerpt, everywhere it is shown
    run("start", "echo", "--timeout", "60", rc=(1,))
    for args in (("status", "echo"), ("status", "echo", "--json"), ("wait", "echo", "--timeout", "20"),
                 ("wait", "echo", "--json", "--timeout", "20")):
        run(*args, rc=(0, 1, 4))
    run("record", "echo")  # into the state dir: checked with the other files below
    assert any("unrecognized arguments: --hf-token" in t for _, t in said), said[-1][1]  # the echo did happen

    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    results = tmp_path / "results"
    run("sweep", bu.name, str(plan), "--out", str(results), "--yes", timeout=240)

    port = free_port()
    exporter = bu.popen("exporter", "--listen", f"127.0.0.1:{port}", bu.name, label="exporter")
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        def scrape() -> str:
            try:
                with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    body = r.read().decode()
            except OSError:
                return ""
            return body if 'bringup_info{' in body and "--api-key" in body else ""
        body = until("the exporter's flags label", scrape, 60)
        said.append(("exporter scrape", body))
    finally:
        exporter.proc.send_signal(signal.SIGINT)
        res = exporter.finish(30)
        said.append(("exporter", res.text))

    said.append(("the console's screens", asyncio.run(console_text(bu, results))))

    for what, text in said:
        assert not leaks(text), f"{what} printed {leaks(text)}:\n" + "\n".join(
            ln for ln in text.split("\n") if leaks(ln))

    exposed = []
    for root in (bu.state_dir, results):
        for dirpath, _, files in os.walk(root):
            for f in files:
                p = Path(dirpath) / f
                found = leaks(p.read_text(errors="replace"))
                if found and readable_by_others(p, root):
                    exposed.append(f"{p.relative_to(tmp_path)} ({oct(stat.S_IMODE(p.stat().st_mode))}): {found}")
    assert not exposed, "\n".join(exposed)
    # and none in what bringup records for people to read (records, sweep results, history, the lock record),
    # private or not: only what starts the server again holds them, and the server's own log
    recorded = [f"{p.relative_to(tmp_path)}: {leaks(p.read_text(errors='replace'))}"
                for root in (bu.state_dir, results) for p in root.rglob("*")
                if p.is_file() and not keeps_values(p) and leaks(p.read_text(errors="replace"))]
    assert not recorded, "\n".join(recorded)
    # what bringup must keep to start the server again is kept, privately
    argv = bu.run_dir / "argv.json"
    assert JSON_API in argv.read_text() and not argv.stat().st_mode & 0o077
