"""Fault injection on real components: the systemd test host (systemd, journald, OpenSSH in a container booted by
.ci/testhost.sh) and bringup's own commands and engine. Used by tests/e2e/test_faults.py (one trial of each fault, in
CI) and benchmarks/faults.py (many trials, figures for docs/results.md).

A trial: a `bringup restart` of the remote deployment toggles a flag; at a random moment of it (lock, flags, stop,
release, start or follow) one fault is injected; when everything has ended, invariants that must never break are
checked against the host's own records:

- no false ready: a restart that says ready names the run it started, and that run was started with the flags it
  wrote (the server prints its arguments into the host's journal);
- the lock: two restarts never act (write flags, stop, start) in overlapping spans;
- the journal: across reconnects the watching engine neither lost nor repeated a line (by cursor, against
  `journalctl` on the host);
- the watching engine (the console's) never dies, and its phase agrees with the host's state within 10 s of the
  fault's end; during a hung link it says its data are stale within 10 s;
- the console itself (`bringup console`, in tmux) never exits, and its screen shows that phase within 10 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.config_toml import ConfigFile
from tests.helpers.simdeploy import ALL_GPUS, UNIT, hosts_on_testhost, sim_port_on_testhost, systemd_deployment
from tests.helpers.wait import slack
from tui.config.settings import ProbeConfig, load
from tui.engine import Engine, LogsRead
from tui.model import LogLine, Phase

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "testhost.sh"
FAULTS = ("ssh-kill", "sshd-stop", "server-kill", "second-restart", "ctrl-c", "host-reboot")
CONVERGE_LIMIT_S = 10.0
STALE_LIMIT_S = 10.0
SSHD_STOP_S = 15.0
ACTIONS = {("flags", "done"), ("stop", "running"), ("start", "running")}


def texec(*argv: str, timeout: float = 60, check: bool = False) -> str:
    res = subprocess.run(["bash", str(SCRIPT), "exec", *argv], capture_output=True, text=True, cwd=ROOT,
                         timeout=slack(timeout))
    if check and res.returncode != 0:
        raise RuntimeError(f"{argv}: {res.returncode} {res.stderr}")
    return res.stdout


def testhost(*args: str, timeout: float = 240) -> None:
    subprocess.run(["bash", str(SCRIPT), *args], check=True, cwd=ROOT, timeout=slack(timeout), capture_output=True)


def host_unit() -> tuple[str, bool]:
    out = texec("systemctl", "show", UNIT, "-p", "InvocationID,ActiveState")
    p = dict(x.split("=", 1) for x in out.splitlines() if "=" in x)
    return p.get("InvocationID", ""), p.get("ActiveState", "") in ("active", "activating", "reloading")


def host_cursors(invocation: str) -> list[str]:
    out = texec("journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json", "--no-pager",
                "--output-fields=__CURSOR", timeout=120)
    return [json.loads(x)["__CURSOR"] for x in out.splitlines() if x.startswith("{")]


def server_args(invocation: str) -> str:
    out = texec("journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "cat", "--no-pager", "-g",
                "server_args=", timeout=60)
    return out


def write_config(tmp: Path, ssh_config: Path, port: int) -> Path:
    dep = systemd_deployment(port, gpus=ALL_GPUS, release_tolerance_mib=512, release_timeout_s=120,
                             ready_timeout_s=90)
    return ConfigFile(state_dir=tmp / "state", probe=ProbeConfig(interval_s=0.3), hosts=hosts_on_testhost(ssh_config),
                      deployments={"remote": dep}).write(tmp / "faults.toml")


class Cmd:
    """A `bringup` command in the background, its JSON lines kept with their arrival times."""

    def __init__(self, cfg: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
        self.args = args
        self.proc = subprocess.Popen([sys.executable, "-m", "tui", "--config", str(cfg), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=cfg.parent)
        self.lines: list[tuple[float, Any]] = []
        self.err = ""
        self._reader = asyncio.get_running_loop().run_in_executor(None, self._read)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.lines.append((time.time(), json.loads(raw)))
            except ValueError:
                self.lines.append((time.time(), raw))

    def steps(self) -> list[dict[str, Any]]:
        return [v for _, v in self.lines if isinstance(v, dict) and "step" in v]

    def last_step(self) -> str:
        s = self.steps()
        return s[-1]["step"] if s else "lock"

    def final(self) -> dict[str, Any] | None:
        for _, v in reversed(self.lines):
            if isinstance(v, dict) and "ok" in v:
                return v
        return None

    async def finish(self, timeout: float = 240) -> int:
        try:
            rc = await asyncio.wait_for(asyncio.to_thread(self.proc.wait), slack(timeout))
        except TimeoutError:
            self.proc.kill()
            rc = await asyncio.to_thread(self.proc.wait)
        await self._reader
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()
        return rc


@dataclass
class Trial:
    fault: str
    at_step: str = ""
    delay_s: float = 0.0
    rcs: list[int] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    converge_s: float | None = None
    stale_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"fault": self.fault, "at_step": self.at_step, "delay_s": round(self.delay_s, 2), "rcs": self.rcs,
                "violations": self.violations, "converge_s": self.converge_s, "stale_s": self.stale_s}


class Console:
    """The real console (`bringup console remote`) in a terminal of its own (tmux), open through every trial: its
    process must never exit, and its screen must show the phase the host's state implies."""

    def __init__(self, cfg: Path) -> None:
        self.sock = str(cfg.parent / "tmux.sock")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BRINGUP_", "TMUX"))}
        env["TERM"] = "xterm-256color"
        cmd = f"{sys.executable} -m tui --config {cfg} console remote"
        self.tmux("new-session", "-d", "-s", "faults", "-x", "160", "-y", "48", "-c", str(cfg.parent), cmd, env=env)
        self.tmux("set-option", "-t", "faults", "remain-on-exit", "on")

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, timeout=slack(10),
                              env=env).stdout

    async def check(self, w: Engine) -> list[str]:
        if self.tmux("list-panes", "-t", "faults", "-F", "#{pane_dead}").strip() != "0":
            return [f"the console exited: {self.tmux('capture-pane', '-p', '-t', 'faults')[-1500:]}"]
        deadline = time.time() + CONVERGE_LIMIT_S
        while time.time() < deadline:
            # the engine's phase now, each time: the console's own engine probes on its own clock and may reach the
            # next phase (WARMUP -> READY) a moment before or after this one
            want = f" {str(w.snapshot(time.time()).phase).upper()} "
            screen = await asyncio.to_thread(self.tmux, "capture-pane", "-p", "-t", "faults")
            if want in screen:
                return []
            await asyncio.sleep(0.3)
        return [f"the console does not show{want}within {CONVERGE_LIMIT_S:g} s:\n{screen[:1200]}"]

    def close(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.tmux("kill-server")


class Harness:
    def __init__(self, cfg: Path, rng: random.Random) -> None:
        self.cfg = cfg
        self.rng = rng
        self.settings = load(str(cfg))
        self.watch: Engine | None = None
        self.lines: list[LogLine] = []  # what the engine sent its listeners
        self.console: Console | None = None
        self.flag_on = False

    async def __aenter__(self) -> Harness:
        # the console's engine, watching through every trial: it must never die
        self.watch = Engine(self.settings, "remote", self.settings.deployments["remote"])
        self.watch.subscribe(lambda u: self.lines.extend(u.lines) if isinstance(u, LogsRead) else None)
        await self.watch.start()
        self.console = Console(self.cfg) if shutil.which("tmux") else None
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.console is not None:
            self.console.close()
        if self.watch is not None:
            await self.watch.close()

    async def bring_ready(self) -> None:
        """Each trial starts from a ready server (after a host reboot, one is started again)."""
        for _ in range(3):
            c = Cmd(self.cfg, "restart", "remote", "--yes", "--json")
            if await c.finish() == 0:
                return
            await asyncio.sleep(2.0)  # a host just rebooted may still be starting sshd
        raise RuntimeError(f"could not bring the deployment to ready: {c.err} {c.lines[-3:]}")

    async def run(self, fault: str) -> Trial:
        assert self.watch is not None
        w = self.watch
        await self.bring_ready()
        trial = Trial(fault)
        self.flag_on = not self.flag_on
        toggle = ("--set" if self.flag_on else "--unset", "disable-cuda-graph")
        a = Cmd(self.cfg, "restart", "remote", *toggle, "--yes", "--json")
        cmds = [(a, self.flag_on)]
        trial.delay_s = self.rng.uniform(0.5, 6.0)  # python's start, then lock .. follow
        await asyncio.sleep(trial.delay_s)
        trial.at_step = a.last_step()
        t_fault = time.time()
        stale_task = asyncio.create_task(self._time_to_stale(t_fault)) if fault == "sshd-stop" else None
        if fault == "ssh-kill":
            texec("pkill", "-KILL", "-f", "sshd: .*@")
        elif fault == "sshd-stop":
            texec("pkill", "-STOP", "sshd")
            try:
                await asyncio.sleep(SSHD_STOP_S)
            finally:
                texec("pkill", "-CONT", "sshd")
        elif fault == "server-kill":
            texec("systemctl", "kill", "-s", "KILL", UNIT)
        elif fault == "second-restart":
            cmds.append((Cmd(self.cfg, "restart", "remote", "--set" if not self.flag_on else "--unset",
                             "disable-cuda-graph", "--yes", "--json"), not self.flag_on))
        elif fault == "ctrl-c":
            a.proc.send_signal(signal.SIGINT)
        elif fault == "host-reboot":
            await asyncio.to_thread(testhost, "down")
            await asyncio.to_thread(testhost, "up")
        t_end = time.time()
        if stale_task is not None:
            trial.stale_s = await stale_task
            if trial.stale_s is None or trial.stale_s > STALE_LIMIT_S:
                trial.violations.append(f"stale not marked within {STALE_LIMIT_S:g} s of a hung link "
                                        f"({trial.stale_s})")
        converging = asyncio.create_task(self._converge(t_end))  # from the fault's end, while commands go on
        for c, _ in cmds:
            rc = await c.finish()
            trial.rcs.append(rc)
            if "Traceback" in c.err or "internal error" in c.err:
                trial.violations.append(f"{c.args}: crashed: {c.err[-3000:]}")
        trial.converge_s = await converging
        if trial.converge_s is None:
            trial.violations.append(f"phase did not match the host within {CONVERGE_LIMIT_S:g} s of the fault")
        trial.violations += self._check_ready_claims(cmds)
        trial.violations += self._check_lock(cmds)
        trial.violations += await asyncio.to_thread(self._check_journal)
        if any(t.done() for t in w._tasks):
            trial.violations.append("a collector of the watching engine ended")
        if self.console is not None:
            trial.violations += await self.console.check(w)
        return trial

    async def _time_to_stale(self, t0: float) -> float | None:
        assert self.watch is not None
        while time.time() - t0 < SSHD_STOP_S:
            if self.watch.snapshot(time.time()).phase == Phase.UNKNOWN:
                return time.time() - t0
            await asyncio.sleep(0.1)
        return None

    async def _converge(self, t_end: float) -> float | None:
        """Seconds from the fault's end until the engine's run and running/stopped agree with the host's."""
        assert self.watch is not None
        w = self.watch
        while time.time() - t_end < CONVERGE_LIMIT_S + 20:
            inv, running = await asyncio.to_thread(host_unit)
            snap = w.snapshot(time.time())
            u = w.state.unit
            t = time.time()
            if (u is not None and u.invocation == inv and u.running == running and snap.phase != Phase.UNKNOWN
                    and (snap.phase in (Phase.STOPPED, Phase.FAILED)) != running):
                took = max(0.0, t - t_end)
                return took if took <= CONVERGE_LIMIT_S else None
            await asyncio.sleep(0.2)
        return None

    def _check_ready_claims(self, cmds: list[tuple[Cmd, bool]]) -> list[str]:
        bad = []
        for c, flag in cmds:
            fin = c.final()
            if not fin or not fin.get("ok"):
                continue
            inv = str(fin.get("invocation") or "")
            started = [s["detail"] for s in c.steps() if s["step"] == "start" and s["status"] == "done"]
            if not started or inv[:12] not in started[-1]:
                bad.append(f"{c.args}: ready for run {inv[:12]}, which is not the run it started ({started})")
                continue
            args = server_args(inv)
            want = "disable_cuda_graph=True" if flag else "disable_cuda_graph=False"
            # SGLang up to 0.5.18 prints `ServerArgs(disable_cuda_graph=True, ...)`, 0.5.20+ a dict
            # (`'disable_cuda_graph': True`); the simulated server follows the release it plays
            said = re.search(r"disable_cuda_graph'?(?:=|: )(True|False)", args)
            if said is None or said.group(1) != str(flag):
                bad.append(f"{c.args}: ready for run {inv[:12]}, whose flags are not those it wrote ({want})")
        return bad

    def _check_lock(self, cmds: list[tuple[Cmd, bool]]) -> list[str]:
        spans = []
        for c, _ in cmds:
            acts = [s["at"] for s in c.steps() if (s["step"], s["status"]) in ACTIONS]
            if acts:
                spans.append((min(acts), max(acts), c.args))
        spans.sort()
        return [f"two restarts acted at once: {a[2]} and {b[2]}" for a, b in itertools.pairwise(spans)
                if b[0] < a[1]]

    def _check_journal(self) -> list[str]:
        assert self.watch is not None
        by_inv: dict[str, list[str]] = {}
        for line in list(self.lines):
            if line.invocation and line.cursor:
                by_inv.setdefault(line.invocation, []).append(line.cursor)
        bad = []
        for inv, got in by_inv.items():
            dup = len(got) - len(set(got))
            if dup:
                bad.append(f"run {inv[:12]}: {dup} journal lines repeated")
            host = host_cursors(inv)
            index = {c: i for i, c in enumerate(host)}
            seen = sorted(index[c] for c in set(got) if c in index)
            if not seen:
                continue
            missing = [host[i] for i in range(seen[0], seen[-1] + 1) if host[i] not in set(got)]
            if missing:
                bad.append(f"run {inv[:12]}: {len(missing)} journal lines lost")
        return bad


def summarize(trials: list[Trial]) -> dict[str, Any]:
    conv = sorted(t.converge_s for t in trials if t.converge_s is not None)
    stale = sorted(t.stale_s for t in trials if t.stale_s is not None)

    def pct(xs: list[float], q: float) -> float | None:
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else None

    per: dict[str, dict[str, Any]] = {}
    for t in trials:
        d = per.setdefault(t.fault, {"n": 0, "violations": 0, "converge": []})
        d["n"] += 1
        d["violations"] += len(t.violations)
        if t.converge_s is not None:
            d["converge"].append(t.converge_s)
    for d in per.values():
        xs = sorted(d.pop("converge"))
        d["converge_p50_s"], d["converge_p95_s"] = pct(xs, 0.5), pct(xs, 0.95)
    return {"trials": len(trials), "violations": sum(len(t.violations) for t in trials),
            "converge_p50_s": pct(conv, 0.5), "converge_p95_s": pct(conv, 0.95),
            "stale_p50_s": pct(stale, 0.5), "stale_max_s": stale[-1] if stale else None, "per_fault": per}


sim_port = sim_port_on_testhost  # the name benchmarks/faults.py knows
